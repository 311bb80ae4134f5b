"""A run whose database goes away: it fails with storage_unavailable when that can still be written, and is
left for recovery when it cannot."""

import asyncio
import logging

import pytest

from application.errors import StorageUnavailable
from application.ports.llm import ModelRequest
from application.ports.tracing import Level
from application.runs.create_run import CreateRun, CreateRunCommand
from application.runs.recover_runs import RecoverRuns
from domain.messages import MessageRole
from domain.run_events import RunFailed
from domain.runs import Run, RunStatus
from tests.unit.fakes.app import FakeApp, admin
from tests.unit.fakes.ports import Hold, answer, call, calls


async def queued(app: FakeApp) -> Run:
    org = await app.organization()
    agent = await app.agent(org)
    thread = await app.thread(agent)
    command = CreateRunCommand(caller=admin(org), thread_id=thread.id, input="Hello")
    return (await CreateRun(app.uow, app.clock, app.ids, app.bus, app.executor).execute(command)).run


async def stored(app: FakeApp, run: Run) -> Run:
    async with app.uow.read_only() as uow:
        found = await uow.runs.get(run.org_id, run.id)
    assert found is not None
    return found


def fail_commits_during_the_model_call(app: FakeApp, count: int) -> None:
    async def outage(_request: ModelRequest) -> None:
        app.store.failing_commits = count

    app.model.before = outage


async def test_a_run_whose_answer_cannot_be_stored_fails_with_storage_unavailable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = FakeApp()
    app.model.then(answer("Hi there"))
    run = await queued(app)
    fail_commits_during_the_model_call(app, 1)
    with caplog.at_level(logging.WARNING):
        failed = await app.execute_run().execute(run.org_id, run.id)

    assert failed.status is RunStatus.FAILED and failed.error is not None
    assert failed.error.code == "storage_unavailable"
    assert await stored(app, run) == failed
    assert failed.step_count == 0  # the answer was never stored
    assert app.bus.types(run.id)[-1] == "run.failed"
    ended = app.bus.published[-1].payload
    assert isinstance(ended, RunFailed) and ended.error.code == "storage_unavailable"
    trace_end = app.tracer.of(run.id).ended
    assert trace_end is not None and trace_end["level"] is Level.ERROR
    assert "internal_error" not in caplog.text and all(r.exc_info is None for r in caplog.records)


async def outage_once_the_tool_results_are_stored(app: FakeApp, run: Run, thinking: Hold) -> None:
    """When the model is called the second time, the first step's tool results are stored beside the call: once
    they are, the database goes away (for one commit: the answer's), and the model answers."""
    await thinking.received.wait()
    async with app.uow.read_only() as uow:
        so_far = await uow.messages.list(run.org_id, run.thread_id, limit=100, after_position=None)
    assert [m.role for m in so_far][-1] is MessageRole.TOOL
    app.store.failing_commits = 1
    thinking.release.set()


async def test_a_run_that_completed_only_in_memory_fails_as_stored() -> None:
    """The answer that would complete the run is lost with its write: the stored run, still in progress, fails."""
    app = FakeApp()
    thinking = Hold()
    app.model.then(calls(call("nothing_here")), thinking, answer("Done"))
    run = await queued(app)
    executing = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
    await outage_once_the_tool_results_are_stored(app, run, thinking)
    failed = await executing
    assert failed.status is RunStatus.FAILED and failed.error is not None
    assert failed.error.code == "storage_unavailable"
    assert failed.step_count == 1  # the first step was stored, the second was not
    assert await stored(app, run) == failed


async def test_when_even_the_failure_cannot_be_stored_the_run_is_left_for_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = FakeApp()
    app.model.then(answer("Hi there"))
    run = await queued(app)
    fail_commits_during_the_model_call(app, 2)
    with caplog.at_level(logging.WARNING):
        await app.execute_run().execute(run.org_id, run.id)

    assert (await stored(app, run)).status is RunStatus.IN_PROGRESS
    left = [r for r in caplog.records if "left for recovery" in r.getMessage()]
    assert [(r.levelno, r.exc_info) for r in left] == [(logging.WARNING, None)]
    assert all(r.levelno < logging.ERROR for r in caplog.records)

    interrupted, _ = await RecoverRuns(app.uow, app.clock, app.bus, app.executor).execute()
    recovered = await stored(app, run)
    assert interrupted == 1 and recovered.error is not None and recovered.error.code == "interrupted"


async def test_a_run_that_cannot_be_started_stays_queued() -> None:
    app = FakeApp()
    run = await queued(app)
    app.store.failing_commits = 1
    with pytest.raises(StorageUnavailable):
        await app.execute_run().execute(run.org_id, run.id)
    assert (await stored(app, run)).status is RunStatus.QUEUED
    assert app.model.requests == []


async def test_a_run_handed_back_on_an_outage_stays_as_stored_and_goes_on_from_its_last_step_when_taken_again() -> None:
    """As a worker executes runs: the run is not failed, and its job is tried again."""
    app = FakeApp()
    thinking = Hold()
    app.model.then(calls(call("nothing_here")), thinking, answer("Lost with its write"), answer("Done"))
    run = await queued(app)
    executing = asyncio.create_task(app.execute_run().execute(run.org_id, run.id, hand_back_on_outage=True))
    await outage_once_the_tool_results_are_stored(app, run, thinking)
    with pytest.raises(StorageUnavailable):
        await executing
    paused = await stored(app, run)
    assert paused.status is RunStatus.IN_PROGRESS and paused.step_count == 1
    assert "run.failed" not in app.bus.types(run.id)
    trace_end = app.tracer.of(run.id).ended
    assert trace_end is not None and trace_end["level"] is Level.WARNING

    done = await app.execute_run().execute(run.org_id, run.id, hand_back_on_outage=True)
    assert done.status is RunStatus.COMPLETED and done.step_count == 2
    assert len(app.model.requests) == 3  # the lost answer asked for again, not the stored step
    async with app.uow.read_only() as uow:
        thread = await uow.messages.list(run.org_id, run.thread_id, limit=100, after_position=None)
    assert [m.text for m in thread if m.role is MessageRole.ASSISTANT] == ["", "Done"]


async def test_a_run_cancelled_during_an_outage_is_handed_back_and_ends_cancelled_when_taken_again() -> None:
    """As a worker executes runs: its job is tried again, instead of leaving the run in progress for ever."""
    app = FakeApp()
    thinking = Hold()
    app.model.then(thinking, answer("Never told"))
    run = await queued(app)
    executing = asyncio.create_task(app.execute_run().execute(run.org_id, run.id, hand_back_on_outage=True))
    await thinking.received.wait()
    async with app.uow as uow:  # the user's cancel, stored by the API
        await uow.runs.request_cancel(run.org_id, run.id)
        await uow.commit()
    app.store.failing_commits = 1
    executing.cancel()  # the worker stops the run's model call
    with pytest.raises(StorageUnavailable):
        await executing
    assert (await stored(app, run)).status is RunStatus.IN_PROGRESS
    assert "run.cancelled" not in app.bus.types(run.id)

    ended = await app.execute_run().execute(run.org_id, run.id, hand_back_on_outage=True)
    assert ended.status is RunStatus.CANCELLED and (await stored(app, run)).status is RunStatus.CANCELLED
    assert app.bus.types(run.id)[-1] == "run.cancelled"
