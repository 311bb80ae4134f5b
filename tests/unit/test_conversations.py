"""Runs asked for as stateless chat clients ask (Converse) and the client tool results that resume them
(AnswerToolCalls), with the fakes of the ports."""

import pytest

from application.errors import AgentNotFound, IdempotencyKeyReused, RunNotFound, ThreadBusy
from application.runs.conversations import AnswerToolCalls, AnswerToolCallsCommand, Converse, ConverseCommand, Turn
from application.runs.submit_tool_results import SubmitToolResults, ToolResultInput
from domain.agents import Agent
from domain.errors import InvalidValue
from domain.messages import MessageRole, TextContent
from domain.organizations import Organization
from domain.runs import ClientTool, PendingToolCall, Run, RunStatus
from tests import builders
from tests.unit.fakes.app import FakeApp, member

HI = Turn(role=MessageRole.USER, content=(TextContent(text="Hi there"),))


@pytest.fixture
def app() -> FakeApp:
    return FakeApp()


def converse(app: FakeApp) -> Converse:
    return Converse(app.uow, app.clock, app.ids, app.bus, app.executor)


def answer(app: FakeApp) -> AnswerToolCalls:
    return AnswerToolCalls(app.uow, SubmitToolResults(app.uow, app.clock, app.ids, app.bus, app.executor))


async def setup(app: FakeApp) -> tuple[Organization, Agent]:
    org = await app.organization()
    return org, await app.agent(org, slug="support")


async def waiting(app: FakeApp, run: Run, call_id: str) -> None:
    """The run asked for a client tool call and waits for its result."""
    async with app.uow as uow:
        stored = await uow.runs.get(run.org_id, run.id)
        assert stored is not None
        stored.start(builders.NOW)
        stored.require_action(
            (PendingToolCall(id=call_id, name="get_weather", arguments={}, type="client"),), builders.NOW
        )
        await uow.runs.save(stored)
        await uow.commit()


async def test_a_conversation_becomes_a_new_thread_and_a_queued_run_with_its_own_instructions(app: FakeApp) -> None:
    org, agent = await setup(app)
    earlier = Turn(role=MessageRole.ASSISTANT, content=(TextContent(text="Hello"),))
    conversing = await converse(app).execute(
        ConverseCommand(
            caller=member(org),
            agent_slug="support",
            turns=[HI, earlier, HI],
            instructions="Be brief.",
            thread_metadata={"api": "chat.completions"},
        )
    )
    run = conversing.run
    assert conversing.created and run.status is RunStatus.QUEUED and run.agent_id == agent.id
    assert run.instructions == "Be brief." and app.executor.submitted == [(org.id, run.id)]
    async with app.uow.read_only() as uow:
        thread = await uow.threads.get(org.id, run.thread_id)
        history = await uow.messages.list(org.id, run.thread_id, limit=10, after_position=None)
    assert thread is not None and thread.title == "Hi there" and thread.metadata == {"api": "chat.completions"}
    assert [(m.role, m.text) for m in history] == [
        (MessageRole.USER, "Hi there"),
        (MessageRole.ASSISTANT, "Hello"),
        (MessageRole.USER, "Hi there"),
    ]


async def test_a_conversation_goes_on_in_the_thread_of_an_earlier_run_once_it_ended(app: FakeApp) -> None:
    org, _ = await setup(app)
    first = (await converse(app).execute(ConverseCommand(caller=member(org), agent_slug="support", turns=[HI]))).run
    follow_up = ConverseCommand(caller=member(org), agent_slug="support", turns=[HI], continues=first.id)
    with pytest.raises(ThreadBusy):
        await converse(app).execute(follow_up)
    async with app.uow as uow:
        stored = await uow.runs.get(org.id, first.id)
        assert stored is not None
        stored.cancel(builders.NOW)
        await uow.runs.save(stored)
        await uow.commit()
    second = (await converse(app).execute(follow_up)).run
    assert second.thread_id == first.thread_id and second.id != first.id


async def test_an_unknown_slug_or_another_organizations_agent_is_not_found(app: FakeApp) -> None:
    org, _ = await setup(app)
    other = await app.organization()
    for caller, slug in ((member(org), "nobody"), (member(other), "support")):
        with pytest.raises(AgentNotFound):
            await converse(app).execute(ConverseCommand(caller=caller, agent_slug=slug, turns=[HI]))


async def test_another_organizations_run_cannot_be_continued(app: FakeApp) -> None:
    org, _ = await setup(app)
    other = await app.organization()
    await app.agent(other, slug="support")
    theirs = (await converse(app).execute(ConverseCommand(caller=member(other), agent_slug="support", turns=[HI]))).run
    with pytest.raises(RunNotFound):
        await converse(app).execute(
            ConverseCommand(caller=member(org), agent_slug="support", turns=[HI], continues=theirs.id)
        )


async def test_a_request_without_messages_or_with_clashing_tools_is_refused(app: FakeApp) -> None:
    org, agent = await setup(app)
    with pytest.raises(InvalidValue):
        await converse(app).execute(ConverseCommand(caller=member(org), agent_slug="support"))
    sub = await app.agent(org, slug="helper")
    async with app.uow as uow:
        agent.sub_agent_ids = (sub.id,)
        await uow.agents.save(agent)
        await uow.commit()
    clash = ClientTool(name="agent__helper", description="", parameters={"type": "object"})
    with pytest.raises(InvalidValue):
        await converse(app).execute(
            ConverseCommand(caller=member(org), agent_slug="support", turns=[HI], client_tools=[clash])
        )


async def test_the_same_idempotency_key_gives_back_the_same_run_for_the_same_request_only(app: FakeApp) -> None:
    org, _ = await setup(app)
    command = ConverseCommand(caller=member(org), agent_slug="support", turns=[HI], idempotency_key="k")
    first = await converse(app).execute(command)
    again = await converse(app).execute(command)
    assert not again.created and again.run.id == first.run.id and len(app.executor.submitted) == 1
    with pytest.raises(IdempotencyKeyReused):
        await converse(app).execute(
            ConverseCommand(caller=member(org), agent_slug="support", turns=[HI, HI], idempotency_key="k")
        )


async def test_tool_results_resume_the_run_waiting_for_their_calls(app: FakeApp) -> None:
    org, _ = await setup(app)
    run = (await converse(app).execute(ConverseCommand(caller=member(org), agent_slug="support", turns=[HI]))).run
    await waiting(app, run, "call_1")
    results = [ToolResultInput(tool_use_id="call_1", result="sunny")]
    resumed = await answer(app).execute(AnswerToolCallsCommand(caller=member(org), results=results))
    assert resumed is not None and resumed.run.id == run.id and resumed.run.status is RunStatus.IN_PROGRESS
    assert resumed.after_seq >= 1 and app.executor.submitted[-1] == (org.id, run.id)
    async with app.uow.read_only() as uow:
        last = await uow.messages.last(org.id, run.thread_id)
    assert last is not None and last.role is MessageRole.TOOL


async def test_tool_results_no_run_waits_for_are_left_to_a_new_conversation(app: FakeApp) -> None:
    org, _ = await setup(app)
    other = await app.organization()
    await app.agent(other, slug="support")
    theirs = (await converse(app).execute(ConverseCommand(caller=member(other), agent_slug="support", turns=[HI]))).run
    await waiting(app, theirs, "call_9")
    results = [ToolResultInput(tool_use_id="call_9", result="sunny")]
    assert await answer(app).execute(AnswerToolCallsCommand(caller=member(org), results=results)) is None
    with pytest.raises(RunNotFound):
        await answer(app).execute(AnswerToolCallsCommand(caller=member(org), results=results, run_id=theirs.id))
