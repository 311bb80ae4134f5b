"""Usage reports and the audit log on fakes: admins only, the ranges a report takes, and an audit event that is
stored only with the change it describes."""

from datetime import timedelta

import pytest

from application.errors import InvalidCursor, InvalidReference, PermissionDenied
from application.pagination import PageRequest
from application.ports.persistence import UsageGrouping
from application.use_cases.agents import UpdateAgent, UpdateAgentCommand
from application.use_cases.audit_events import AuditEventFilter, ListAuditEvents
from application.use_cases.usage import GetUsage, UsageQuery
from domain.agents import AgentChanges
from domain.audit import AuditAction
from domain.errors import InvalidValue
from domain.ids import AgentId
from tests.unit.fakes.app import FakeApp, admin, member


@pytest.fixture
def app() -> FakeApp:
    return FakeApp()


async def test_a_report_covers_the_thirty_days_up_to_today_unless_told(app: FakeApp) -> None:
    org = await app.organization()
    report = await GetUsage(app.uow, app.clock).execute(UsageQuery(caller=admin(org)))
    today = app.clock.now().date()
    assert (report.first_day, report.last_day) == (today - timedelta(days=29), today)
    assert report.group_by is UsageGrouping.DAY and report.groups == [] and report.totals.model_calls == 0


@pytest.mark.parametrize("days", [-1, 366], ids=["from after to", "over a year"])
async def test_a_report_refuses_a_range_it_cannot_cover(app: FakeApp, days: int) -> None:
    org = await app.organization()
    last = app.clock.now().date()
    with pytest.raises(InvalidValue):
        await GetUsage(app.uow, app.clock).execute(
            UsageQuery(caller=admin(org), first_day=last - timedelta(days=days), last_day=last)
        )


async def test_members_read_neither_usage_nor_the_audit_log(app: FakeApp) -> None:
    org = await app.organization()
    with pytest.raises(PermissionDenied):
        await GetUsage(app.uow, app.clock).execute(UsageQuery(caller=member(org)))
    with pytest.raises(PermissionDenied):
        await ListAuditEvents(app.uow).execute(member(org), PageRequest(), AuditEventFilter())


async def test_a_change_that_fails_leaves_no_event(app: FakeApp) -> None:
    org = await app.organization()
    agent = await app.agent(org)
    update = UpdateAgent(app.uow, app.clock)
    with pytest.raises(InvalidReference):
        missing = AgentChanges(sub_agent_ids=(AgentId(app.ids.new()),))
        await update.execute(UpdateAgentCommand(caller=admin(org), agent_id=agent.id, changes=missing))
    await update.execute(UpdateAgentCommand(caller=admin(org), agent_id=agent.id, changes=AgentChanges(max_steps=3)))
    page = await ListAuditEvents(app.uow).execute(admin(org), PageRequest(), AuditEventFilter(object_id=str(agent.id)))
    assert [(e.action, [c.field for c in e.changes]) for e in page.items] == [
        (AuditAction.AGENT_UPDATED, ["max_steps"])
    ]


async def test_a_cursor_the_log_did_not_hand_out_is_refused(app: FakeApp) -> None:
    org = await app.organization()
    with pytest.raises(InvalidCursor):
        await ListAuditEvents(app.uow).execute(admin(org), PageRequest(cursor="djE6YWJj"), AuditEventFilter())
