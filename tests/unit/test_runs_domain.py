from datetime import UTC, datetime
from uuid import uuid4

import pytest

from application.ports.mcp import McpToolInfo
from application.runs.tools.assembly import ToolAssembler
from application.runs.tools.handler import truncate
from application.use_cases.mcp_publishing import agent_description
from domain.agents import Agent
from domain.errors import IllegalTransition, InvalidValue
from domain.ids import AgentId, IntegrationId, OrgId, RunId, ThreadId
from domain.integrations import McpIntegration
from domain.runs import PendingToolCall, Run, RunStatus
from tests.unit.fakes import FakeGateway, FakeUnitOfWork, NoCommands, PlainSecrets, Unavailable

NOW = datetime(2026, 11, 22, tzinfo=UTC)
ORG = OrgId(uuid4())


def run() -> Run:
    return Run(
        id=RunId(uuid4()),
        org_id=ORG,
        thread_id=ThreadId(uuid4()),
        agent_id=AgentId(uuid4()),
        created_at=NOW,
        updated_at=NOW,
    )


def test_a_run_moves_through_its_states() -> None:
    subject = run()
    subject.start(NOW)
    call = PendingToolCall(id="c1", name="ask", arguments={}, type="client")
    subject.require_action((call,), NOW)
    assert subject.status is RunStatus.REQUIRES_ACTION and subject.required_action == (call,)
    assert subject.resume(["c1"], NOW) == {"c1": call}
    assert subject.required_action == ()
    subject.complete(NOW)
    assert subject.status is RunStatus.COMPLETED and subject.ended_at == NOW


@pytest.mark.parametrize(
    "move",
    [
        lambda r: r.complete(NOW),  # never started
        lambda r: r.resume([], NOW),  # not waiting
        lambda r: (r.start(NOW), r.complete(NOW), r.start(NOW)),  # finished
        lambda r: (r.cancel(NOW), r.cancel(NOW)),  # already cancelled
        lambda r: (r.start(NOW), r.fail("x", "y", NOW), r.request_cancel(NOW)),
    ],
)
def test_illegal_moves_raise(move) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(IllegalTransition):
        move(run())


def test_a_run_waits_only_for_pending_calls() -> None:
    subject = run()
    subject.start(NOW)
    with pytest.raises(InvalidValue):
        subject.require_action((), NOW)


def test_long_results_are_shortened_with_a_marker() -> None:
    assert truncate("abc", 5) == "abc"
    assert truncate("a" * 12, 10) == "a" * 10 + "\n…[truncated: 2 more characters]"


def agent(**overrides: object) -> Agent:
    fields: dict = dict(id=AgentId(uuid4()), org_id=ORG, name="A", slug="a", model="m", created_at=NOW, updated_at=NOW)
    return Agent(**(fields | overrides))


def test_a_published_agent_is_described_by_its_description_or_first_sentence() -> None:
    assert agent_description(agent(description="Plans trips")) == "Plans trips"
    assert agent_description(agent(instructions="You plan trips. Always ask for dates.")) == "You plan trips."
    assert agent_description(agent(instructions="Answer questions\nBe brief.")) == "Answer questions."


async def test_colliding_mcp_tool_names_get_numbered_suffixes(caplog: pytest.LogCaptureFixture) -> None:
    integration = McpIntegration(
        id=IntegrationId(uuid4()),
        org_id=ORG,
        name="X",
        slug="x",
        url="https://mcp.example/",
        created_at=NOW,
        updated_at=NOW,
    )
    tools = [McpToolInfo(name=n, description=n, input_schema={"type": "object"}) for n in ("do.it", "do_it", "do it")]
    assembler = ToolAssembler(
        FakeUnitOfWork(integrations=[integration]),  # type: ignore[arg-type]
        PlainSecrets(),
        FakeGateway(tools=tools),
        NoCommands(),
        Unavailable(),  # type: ignore[arg-type]
        Unavailable(),  # type: ignore[arg-type]
    )
    assembled = await assembler.assemble(agent(mcp_integration_ids=(integration.id,)))
    mcp_tools = [t for t in assembled.tools if t.metadata.get("tool_name")]
    assert [(t.name, t.metadata["tool_name"]) for t in mcp_tools] == [
        ("x__do_it", "do.it"),
        ("x__do_it_2", "do_it"),
        ("x__do_it_3", "do it"),
    ]
    assert sum("collision" in r.getMessage() for r in caplog.records) == 2
