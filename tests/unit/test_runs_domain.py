from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest

from application.ports.mcp import McpToolInfo
from application.runs.tools.assembly import ToolAssembler
from application.runs.tools.handler import truncate
from application.use_cases.mcp_publishing import agent_description
from domain.agents import Agent
from domain.errors import IllegalTransition, InvalidValue
from domain.ids import AgentId, OrgId, ThreadId
from domain.runs import PendingToolCall, Run, RunStatus
from tests import builders
from tests.unit.fakes.persistence import FakeUnitOfWork, Store
from tests.unit.fakes.ports import Commands, FakeGateway, PlainSecrets, Sandbox, Search

NOW = datetime(2026, 11, 22, tzinfo=UTC)
ORG = OrgId(uuid4())


def run() -> Run:
    return builders.run(ORG, ThreadId(uuid4()), AgentId(uuid4()))


def status(subject: Run) -> RunStatus:
    return subject.status


def test_a_run_moves_through_its_states() -> None:
    subject = run()
    subject.start(NOW)
    call = PendingToolCall(id="c1", name="ask", arguments={}, type="client")
    subject.require_action((call,), NOW)
    assert status(subject) is RunStatus.REQUIRES_ACTION and subject.required_action == (call,)
    assert subject.resume(["c1"], NOW) == {"c1": call}
    assert len(subject.required_action) == 0
    subject.complete(NOW)
    assert status(subject) is RunStatus.COMPLETED and subject.ended_at == NOW


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
def test_illegal_moves_raise(move: Callable[[Run], object]) -> None:
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


def agent(**overrides: Any) -> Agent:
    return builders.agent(ORG, **({"name": "A", "slug": "a"} | overrides))


def test_a_published_agent_is_described_by_its_description_or_first_sentence() -> None:
    assert agent_description(agent(description="Plans trips")) == "Plans trips"
    assert agent_description(agent(instructions="You plan trips. Always ask for dates.")) == "You plan trips."
    assert agent_description(agent(instructions="Answer questions\nBe brief.")) == "Answer questions."


async def test_colliding_mcp_tool_names_get_numbered_suffixes(caplog: pytest.LogCaptureFixture) -> None:
    integration = builders.integration(ORG, name="X", slug="x")
    tools = [McpToolInfo(name=n, description=n, input_schema={"type": "object"}) for n in ("do.it", "do_it", "do it")]
    assembler = ToolAssembler(
        FakeUnitOfWork(Store(integrations={integration.id: integration})),
        PlainSecrets(),
        FakeGateway(tools=tools),
        Commands(),
        Search(available=False),
        Sandbox(available=False),
    )
    assembled = await assembler.assemble(agent(mcp_integration_ids=(integration.id,)))
    mcp_tools = [t for t in assembled.tools if t.metadata.get("tool_name")]
    assert [(t.name, t.metadata["tool_name"]) for t in mcp_tools] == [
        ("x__do_it", "do.it"),
        ("x__do_it_2", "do_it"),
        ("x__do_it_3", "do it"),
    ]
    assert sum("collision" in r.getMessage() for r in caplog.records) == 2
