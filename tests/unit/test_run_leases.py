"""Lease fencing on fakes: a process whose run was taken over by another while it waited for the model or
its tools writes nothing more of that run, and stops without a word above INFO."""

import logging

import pytest

from application.errors import LeaseLost
from application.ports.llm import ModelRequest, ModelToolCall
from application.ports.native_tools import CommandSpec
from application.ports.tracing import Level
from application.runs.create_run import CreateRun, CreateRunCommand
from application.runs.events import UNSTORED_SEQS, RunEventStream
from application.runs.recover_runs import RecoverRuns
from application.runs.tools.handler import ToolContext, ToolOutcome
from domain.ids import MessageId
from domain.messages import MessageRole
from domain.native_tools import ToolRef
from domain.run_events import MessageDelta, RunEvent
from domain.runs import Run, RunStatus
from domain.threads import Thread
from domain.tools import Tool, ToolType
from tests.unit.fakes.app import FakeApp, admin
from tests.unit.fakes.ports import Commands, answer, call, calls


async def queued(app: FakeApp) -> tuple[Thread, Run]:
    org = await app.organization()
    agent = await app.agent(org)
    thread = await app.thread(agent)
    command = CreateRunCommand(caller=admin(org), thread_id=thread.id, input="Hello")
    return thread, (await CreateRun(app.uow, app.clock, app.ids, app.bus, app.executor).execute(command)).run


async def stored_events(app: FakeApp, run: Run) -> list[str]:
    async with app.uow.read_only() as uow:
        return [e.type.value for e in await uow.run_events.list(run.org_id, run.id)]


async def stored(app: FakeApp, run: Run) -> Run:
    async with app.uow.read_only() as uow:
        found = await uow.runs.get(run.org_id, run.id)
    assert found is not None
    return found


async def messages(app: FakeApp, thread: Thread) -> list[tuple[MessageRole, str]]:
    async with app.uow.read_only() as uow:
        listed = await uow.messages.list(thread.org_id, thread.id, limit=100, after_position=None)
    return [(m.role, m.text) for m in listed]


def durable(published: list[RunEvent], run: Run) -> list[str]:
    return [e.type.value for e in published if e.run_id == run.id and e.type.value != "message.delta"]


async def test_a_run_taken_over_during_its_model_call_keeps_only_the_new_holders_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = FakeApp()
    app.model.then(answer("from the new holder"), answer("late answer"))
    thread, run = await queued(app)
    second: list[Run] = []

    async def taken_over(_request: ModelRequest) -> None:
        if not app.model.requests[1:]:  # while the first holder waits for the model, another process resumes it
            second.append(await app.execute_run().execute(run.org_id, run.id))

    app.model.before = taken_over
    with caplog.at_level(logging.INFO):
        first = await app.execute_run().execute(run.org_id, run.id)

    assert [r.status for r in second] == [RunStatus.COMPLETED]
    assert first == await stored(app, run)  # the first holder returns the run as the new holder left it
    assert await messages(app, thread) == [
        (MessageRole.USER, "Hello"),
        (MessageRole.ASSISTANT, "from the new holder"),
    ]
    # The new holder announced it went on (numbered past what the first one may have published unstored).
    assert await stored_events(app, run) == ["run.created", "run.in_progress", "run.in_progress", "run.completed"]
    assert durable(app.bus.published, run) == ["run.created", "run.in_progress", "run.in_progress", "run.completed"]
    # The first holder's late deltas and the new holder's events: no number twice.
    seqs = [e.seq for e in app.bus.published if e.run_id == run.id]
    assert len(seqs) == len(set(seqs))
    assert all(r.levelno < logging.ERROR for r in caplog.records)
    assert any("taken over" in r.getMessage() for r in caplog.records)
    first_trace = app.tracer.traces[0].ended
    assert first_trace is not None and first_trace["level"] is Level.WARNING


async def test_a_run_failed_by_recovery_during_its_model_call_stays_failed(caplog: pytest.LogCaptureFixture) -> None:
    app = FakeApp()
    app.model.then(answer("late answer"))
    thread, run = await queued(app)

    async def recovered(_request: ModelRequest) -> None:
        await RecoverRuns(app.uow, app.clock, app.bus, app.executor).execute()

    app.model.before = recovered
    with caplog.at_level(logging.INFO):
        first = await app.execute_run().execute(run.org_id, run.id)

    assert first.status is RunStatus.FAILED and first.error is not None and first.error.code == "interrupted"
    assert await messages(app, thread) == [(MessageRole.USER, "Hello")]
    assert await stored_events(app, run) == ["run.created", "run.in_progress", "run.failed"]
    assert all(r.levelno < logging.ERROR for r in caplog.records)


async def test_a_run_taken_over_during_its_tool_calls_keeps_none_of_their_late_results() -> None:
    """The new holder finds the calls in flight and fails the run as worker_lost; the late results are refused (the
    old holder's next model call, begun while they were being stored, is stopped and its answer never stored)."""
    taken_over: list[Run] = []

    async def slow_command(_call: ModelToolCall, _tool: Tool, context: ToolContext, /) -> ToolOutcome:
        taken_over.append(await app.execute_run().execute(context.org_id, context.run_id))
        return ToolOutcome(text="done late")

    app = FakeApp(commands=Commands(CommandSpec(name="deploy", description="Deploy")))
    app.extra_handlers = {ToolType.COMMAND: slow_command}
    app.model.then(calls(call("command__deploy", {"arguments": []})), answer("never asked"))
    org = await app.organization()
    agent = await app.agent(org, tools=(ToolRef(type=ToolType.COMMAND, config={"name": "deploy"}),))
    thread = await app.thread(agent)
    command = CreateRunCommand(caller=admin(org), thread_id=thread.id, input="Hello")
    run = (await CreateRun(app.uow, app.clock, app.ids, app.bus, app.executor).execute(command)).run

    first = await app.execute_run().execute(run.org_id, run.id)

    [second] = taken_over
    assert second.error is not None and second.error.code == "worker_lost"
    assert first == await stored(app, run)
    assert [role for role, _ in await messages(app, thread)] == [MessageRole.USER, MessageRole.ASSISTANT]
    assert await stored_events(app, run) == ["run.created", "run.in_progress", "tool_call.started", "run.failed"]


async def test_a_write_with_an_older_lease_is_refused() -> None:
    app = FakeApp()
    _thread, run = await queued(app)
    async with app.uow as uow:
        claimed = await uow.runs.claim(run.org_id, run.id)
        assert claimed is not None
        held = claimed.run
        await uow.commit()
    async with app.uow as uow:
        await uow.runs.claim(run.org_id, run.id)  # another process takes it over
        await uow.commit()
    with pytest.raises(LeaseLost):
        async with app.uow as uow:
            await uow.runs.save(held)


async def test_a_holder_publishes_no_unstored_event_a_successor_could_number_the_same() -> None:
    app = FakeApp()
    _thread, run = await queued(app)
    async with app.uow as uow:
        events = await RunEventStream.resume(uow, run.org_id, run.id, app.bus, app.clock)
    delta = MessageDelta(message_id=MessageId(app.ids.new()), text="word ")
    within = RunEvent(run_id=run.id, seq=1 + UNSTORED_SEQS, payload=delta, created_at=app.clock.now())
    beyond = RunEvent(run_id=run.id, seq=2 + UNSTORED_SEQS, payload=delta, created_at=app.clock.now())
    await events.publish(within, beyond)
    # A successor numbers from UNSTORED_SEQS past the last stored event (the run.created event, seq 1).
    assert [e.seq for e in app.bus.published if e.run_id == run.id][-1] == 1 + UNSTORED_SEQS
