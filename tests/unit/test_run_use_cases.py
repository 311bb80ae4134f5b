"""The run use cases around the loop: creating, answering, cancelling, following, recovering and reading runs."""

import asyncio
from dataclasses import dataclass

import pytest

from application.errors import InvalidReference, RunNotFound, StorageUnavailable, ThreadBusy, ThreadNotFound
from application.pagination import PageRequest
from application.runs.cancel_run import CancelRun
from application.runs.create_run import CreatedRun, CreateRun, CreateRunCommand
from application.runs.events import UNSTORED_SEQS
from application.runs.follow_run import FollowRun
from application.runs.queries import GetRun, ListRuns, RunFilter
from application.runs.recorder import Began
from application.runs.recover_runs import RecoverRuns
from application.runs.submit_tool_results import SubmitToolResults, SubmitToolResultsCommand, ToolResultInput
from domain.agents import Agent
from domain.errors import IllegalTransition, InvalidValue
from domain.ids import RunId, ThreadId
from domain.messages import MessageRole, ToolResultContent
from domain.organizations import Organization
from domain.run_events import RunEvent, RunFailed
from domain.runs import ClientTool, PendingToolCall, Run, RunNotWaiting, RunStatus
from domain.threads import Thread
from tests import builders
from tests.unit.fakes.app import FakeApp, admin, member
from tests.unit.fakes.persistence import Store
from tests.unit.fakes.ports import AfterSubscribing, Hold, RecordingExecutor, Reply, answer, call, calls


@pytest.fixture
def app() -> FakeApp:
    return FakeApp()


async def setup(app: FakeApp) -> tuple[Organization, Agent, Thread]:
    org = await app.organization()
    agent = await app.agent(org)
    return org, agent, await app.thread(agent)


def create(app: FakeApp) -> CreateRun:
    return CreateRun(app.uow, app.clock, app.ids, app.bus, app.executor)


async def stored(app: FakeApp, run: Run) -> Run:
    async with app.uow.read_only() as uow:
        found = await uow.runs.get(run.org_id, run.id)
    assert found is not None
    return found


def status(run: Run) -> RunStatus:
    return run.status


# -- CreateRun ------------------------------------------------------------------------------------------


async def test_a_run_is_queued_with_its_input_and_handed_to_the_executor(app: FakeApp) -> None:
    org, agent, thread = await setup(app)
    created = await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="Hi"))
    run = created.run
    assert created.created and status(run) is RunStatus.QUEUED and run.agent_id == agent.id
    assert app.executor.submitted == [(org.id, run.id)]
    assert app.bus.types(run.id) == ["run.created"]
    async with app.uow.read_only() as uow:
        [message] = await uow.messages.list(org.id, thread.id, limit=10, after_position=None)
        events = await uow.run_events.list(org.id, run.id)
    assert (message.role, message.text, message.run_id, message.position) == (MessageRole.USER, "Hi", run.id, 1)
    assert [e.seq for e in events] == [1]


async def test_a_run_created_with_a_slot_free_is_started_as_it_is_created_and_executes_from_there(
    app: FakeApp,
) -> None:
    org, _, thread = await setup(app)
    app.executor.free_slots = 1
    app.model.then(answer("Hello!"))
    created = await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="Hi"))
    run = created.run
    assert status(run) is RunStatus.IN_PROGRESS and status(await stored(app, run)) is RunStatus.IN_PROGRESS
    assert app.executor.submitted == [] and app.bus.types(run.id) == ["run.created", "run.in_progress"]
    began = app.executor.started[run.id]
    assert isinstance(began, Began) and [m.text for m in began.history] == ["Hi"]
    done = await app.execute_run().execute(org.id, run.id, began=began)
    assert status(done) is RunStatus.COMPLETED and status(await stored(app, run)) is RunStatus.COMPLETED
    assert app.bus.types(run.id)[-1] == "run.completed" and app.bus.types(run.id).count("run.in_progress") == 1
    async with app.uow.read_only() as uow:
        events = await uow.run_events.list(org.id, run.id)
        texts = [m.text for m in await uow.messages.list(org.id, thread.id, limit=10, after_position=None)]
    assert [e.type.value for e in events] == ["run.created", "run.in_progress", "run.completed"]
    assert texts == ["Hi", "Hello!"]


class ExecutingSlot:
    """A slot that executes its run as soon as it is started, as the in-process executor does."""

    def __init__(self, app: FakeApp) -> None:
        self._app = app
        self.executions: list[asyncio.Task[Run]] = []

    def start(self, run_id: RunId, began: object) -> None:
        assert isinstance(began, Began)
        execution = self._app.execute_run().execute(began.run.org_id, run_id, began=began)
        self.executions.append(asyncio.ensure_future(execution))

    def release(self) -> None:
        raise AssertionError("the slot was used")


@dataclass
class CreatingAtOnce:
    """A run being created by a request, in a slot that executes it at once (`slot.executions`). The creating
    commit waits for `commit`, which the test sets once the model has been called (`called`)."""

    thread: Thread
    slot: ExecutingSlot
    commit: asyncio.Event
    called: asyncio.Event
    creating: "asyncio.Future[CreatedRun]"


async def creating_at_once(app: FakeApp, *replies: Reply) -> CreatingAtOnce:
    org, _, thread = await setup(app)
    slot, commit, called = ExecutingSlot(app), asyncio.Event(), asyncio.Event()

    async def reserve(_org_id: object) -> ExecutingSlot:
        return slot

    async def before(_request: object) -> None:
        called.set()

    app.executor.reserve = reserve  # type: ignore[method-assign,assignment]
    app.model.before = before
    app.model.then(*replies)
    app.store.commit_waits = commit
    command = CreateRunCommand(caller=member(org), thread_id=thread.id, input="Hi")
    return CreatingAtOnce(thread, slot, commit, called, asyncio.ensure_future(create(app).execute(command)))


@pytest.mark.timeout(60)  # were the model called only after the commit, they would wait for each other
async def test_a_run_started_as_it_is_created_calls_its_model_while_the_creation_commits_and_shows_nothing_before(
    app: FakeApp,
) -> None:
    at_once = await creating_at_once(app, answer("Hello!"))

    await at_once.called.wait()
    assert not at_once.creating.done() and app.bus.published == [] and app.store.runs == {}
    at_once.commit.set()
    run = (await at_once.creating).run
    [execution] = at_once.slot.executions
    done = await execution

    assert status(done) is RunStatus.COMPLETED and status(await stored(app, run)) is RunStatus.COMPLETED
    types = app.bus.types(run.id)
    assert types[:2] == ["run.created", "run.in_progress"] and "message.delta" in types[2:]
    assert types[-1] == "run.completed"


@pytest.mark.timeout(60)  # were the model called only after the commit, they would wait for each other
async def test_a_run_started_as_it_is_created_stops_without_a_word_when_the_creation_does_not_commit(
    app: FakeApp,
) -> None:
    at_once = await creating_at_once(app, answer("Hello!"))
    app.store.failing_commits = 1

    await at_once.called.wait()
    at_once.commit.set()
    with pytest.raises(StorageUnavailable):
        await at_once.creating
    [execution] = at_once.slot.executions
    await execution

    assert len(app.model.requests) == 1 and app.bus.published == []
    assert app.store.runs == {} and app.store.messages == {} and app.store.run_events == {}
    assert app.store.threads[at_once.thread.id].message_count == 0


async def test_a_run_started_as_it_is_created_reads_the_earlier_messages_of_its_thread(app: FakeApp) -> None:
    org, _, thread = await setup(app)
    app.model.then(answer("Hello!"))
    first = await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="Hi"))
    await app.execute_run().execute(org.id, first.run.id)
    app.executor.free_slots = 1
    second = await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="Again"))
    began = app.executor.started[second.run.id]
    assert isinstance(began, Began) and [m.text for m in began.history] == ["Hi", "Hello!", "Again"]


async def test_a_slot_taken_for_a_run_that_is_not_created_is_given_back(app: FakeApp) -> None:
    org, _, thread = await setup(app)
    await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="Hi"))
    app.executor.free_slots = 1
    with pytest.raises(ThreadBusy):
        await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="Again"))
    assert app.executor.free_slots == 1 and app.executor.released == 1 and not app.executor.started


async def test_a_run_started_as_it_is_created_executes_even_if_its_request_ends_as_it_is_published(
    app: FakeApp,
) -> None:
    org, _, thread = await setup(app)
    app.executor.free_slots = 1

    async def client_gone(_event: object) -> None:
        raise asyncio.CancelledError  # the request's task is cancelled: its client went away

    app.bus.publish = client_gone  # type: ignore[method-assign,assignment]
    with pytest.raises(asyncio.CancelledError):
        await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="Hi"))
    [began] = app.executor.started.values()
    assert isinstance(began, Began) and app.executor.released == 0  # not left in_progress with no one on it
    assert status(await stored(app, began.run)) is RunStatus.IN_PROGRESS


async def test_the_same_idempotency_key_gives_back_the_same_run(app: FakeApp) -> None:
    org, _, thread = await setup(app)
    command = CreateRunCommand(caller=member(org), thread_id=thread.id, input="Hi", idempotency_key="k1")
    first = await create(app).execute(command)
    again = await create(app).execute(command)
    assert not again.created and again.run.id == first.run.id and len(app.executor.submitted) == 1


async def test_a_thread_runs_one_run_at_a_time(app: FakeApp) -> None:
    org, _, thread = await setup(app)
    await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="one"))
    with pytest.raises(ThreadBusy):
        await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="two"))


async def test_a_run_needs_a_thread_of_the_organization_and_an_agent(app: FakeApp) -> None:
    org, _agent, thread = await setup(app)
    other = await app.organization()
    with pytest.raises(ThreadNotFound):
        await create(app).execute(CreateRunCommand(caller=member(other), thread_id=thread.id, input="x"))
    bare = builders.thread(org.id)
    async with app.uow as uow:
        await uow.threads.add(bare)
        await uow.commit()
    with pytest.raises(InvalidReference, match="has no agent"):
        await create(app).execute(CreateRunCommand(caller=member(org), thread_id=bare.id, input="x"))
    elsewhere = await app.agent(other)
    with pytest.raises(InvalidReference, match="not found"):
        await create(app).execute(
            CreateRunCommand(caller=member(org), thread_id=bare.id, agent_id=elsewhere.id, input="x")
        )
    assert app.executor.submitted == [] and app.store.runs == {} and app.store.messages == {}


async def test_bad_input_and_client_tools_are_refused(app: FakeApp) -> None:
    org, _, thread = await setup(app)
    with pytest.raises(InvalidValue, match="input"):
        await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input=""))
    with pytest.raises(InvalidValue, match="client tool name"):
        ClientTool(name="no spaces", description="", parameters={})
    with pytest.raises(InvalidValue, match="type object"):
        ClientTool(name="t", description="", parameters={"type": "array"})
    tool = ClientTool(name="t", description="", parameters={})
    with pytest.raises(InvalidValue, match="unique"):
        builders.run(org.id, thread.id, thread.agent_id or builders.agent(org.id).id, client_tools=(tool, tool))


# -- SubmitToolResults ----------------------------------------------------------------------------------


async def waiting_run(app: FakeApp, *call_ids: str) -> tuple[Organization, Thread, Run]:
    org, _agent, thread = await setup(app)
    tools = tuple(ClientTool(name=f"tool_{n}", description="", parameters={}) for n in range(len(call_ids)))
    created = await create(app).execute(
        CreateRunCommand(caller=member(org), thread_id=thread.id, input="go", client_tools=tools)
    )
    app.model.then(calls(*(call(f"tool_{n}", id=i) for n, i in enumerate(call_ids))))
    waiting = await app.execute_run().execute(org.id, created.run.id)
    assert status(waiting) is RunStatus.REQUIRES_ACTION
    return org, thread, waiting


def submit(app: FakeApp) -> SubmitToolResults:
    return SubmitToolResults(app.uow, app.clock, app.ids, app.bus, app.executor)


async def test_in_worker_mode_a_run_goes_to_the_workers_with_the_writes_that_store_it(app: FakeApp) -> None:
    """Created, and resumed with its tool results, the run's job is queued in the same transaction: nothing is
    submitted after the commit, which a process stopping in between would skip."""
    org, _, run = await waiting_run(app, "a")
    app.store.run_jobs = {}  # runs execute from the job queue from here on
    submitted = list(app.executor.submitted)
    results = (ToolResultInput(tool_use_id="a", result="A"),)
    await submit(app).execute(SubmitToolResultsCommand(caller=member(org), run_id=run.id, results=results))
    other, _, thread = await setup(app)
    created = await create(app).execute(CreateRunCommand(caller=member(other), thread_id=thread.id, input="Hi"))
    assert app.executor.submitted == submitted
    assert app.store.run_jobs == {run.id: org.id, created.run.id: other.id}


async def test_results_for_every_waited_call_resume_the_run(app: FakeApp) -> None:
    org, thread, run = await waiting_run(app, "a", "b")
    results = (
        ToolResultInput(tool_use_id="b", result="B"),
        ToolResultInput(tool_use_id="a", result="A", is_error=True),
    )
    resumed = await submit(app).execute(SubmitToolResultsCommand(caller=member(org), run_id=run.id, results=results))
    assert status(resumed) is RunStatus.IN_PROGRESS and resumed.required_action == ()
    assert app.executor.submitted[-1] == (org.id, run.id)
    async with app.uow.read_only() as uow:
        last = await uow.messages.last(org.id, thread.id)
    assert last is not None and last.content == (
        ToolResultContent(tool_use_id="b", tool_name="tool_1", result="B"),
        ToolResultContent(tool_use_id="a", tool_name="tool_0", result="A", is_error=True),
    )
    assert app.bus.types(run.id)[-3:] == ["tool_call.completed", "tool_call.completed", "run.in_progress"]


@pytest.mark.parametrize(
    ("answered", "problem"),
    [
        (["a"], "results are missing for: b"),
        (["a", "b", "c"], "the run did not make these calls: c"),
        (["a", "a", "b"], "each tool call may be answered only once"),
    ],
)
async def test_results_must_answer_each_waited_call_once(app: FakeApp, answered: list[str], problem: str) -> None:
    org, _, run = await waiting_run(app, "a", "b")
    results = tuple(ToolResultInput(tool_use_id=i, result="x") for i in answered)
    with pytest.raises(RunNotWaiting, match=problem):
        await submit(app).execute(SubmitToolResultsCommand(caller=member(org), run_id=run.id, results=results))
    assert status(await stored(app, run)) is RunStatus.REQUIRES_ACTION


async def test_results_for_a_run_that_does_not_wait_are_refused(app: FakeApp) -> None:
    org, _, thread = await setup(app)
    run = (await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="x"))).run
    results = (ToolResultInput(tool_use_id="a", result="x"),)
    with pytest.raises(RunNotWaiting, match="queued, not waiting"):
        await submit(app).execute(SubmitToolResultsCommand(caller=member(org), run_id=run.id, results=results))
    other = await app.organization()
    with pytest.raises(RunNotFound):
        await submit(app).execute(SubmitToolResultsCommand(caller=member(other), run_id=run.id, results=results))


# -- CancelRun ------------------------------------------------------------------------------------------


def cancel(app: FakeApp) -> CancelRun:
    return CancelRun(app.uow, app.clock, app.bus, app.executor)


async def test_a_queued_run_is_cancelled_at_once(app: FakeApp) -> None:
    org, _, thread = await setup(app)
    run = (await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="x"))).run
    cancelled = await cancel(app).execute(member(org), run.id)
    assert status(cancelled) is RunStatus.CANCELLED and status(await stored(app, run)) is RunStatus.CANCELLED
    assert app.bus.types(run.id) == ["run.created", "run.cancelled"]
    with pytest.raises(IllegalTransition, match="already cancelled"):
        await cancel(app).execute(member(org), run.id)


async def test_a_waiting_run_is_cancelled_at_once(app: FakeApp) -> None:
    org, _, run = await waiting_run(app, "a")
    cancelled = await cancel(app).execute(member(org), run.id)
    assert status(cancelled) is RunStatus.CANCELLED and cancelled.required_action == ()
    assert app.bus.types(run.id)[-1] == "run.cancelled"


async def test_an_executing_run_is_asked_to_stop_and_its_executor_stops_it(app: FakeApp) -> None:
    org, _, thread = await setup(app)
    run = (await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="x"))).run
    hold = Hold()
    app.model.then(hold)
    task = asyncio.create_task(app.execute_run().execute(org.id, run.id))
    await hold.received.wait()
    app.executor.tasks[run.id] = task
    cancelled = await cancel(app).execute(member(org), run.id)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert app.executor.cancelled == [run.id]
    assert status(cancelled) is RunStatus.CANCELLED  # re-read after the executor stopped it
    assert (await stored(app, run)).cancel_requested


class Elsewhere(RecordingExecutor):
    """The executor of a run that executes in another process: cancelling it here lets its model answer."""

    def __init__(self, hold: Hold) -> None:
        super().__init__()
        self.hold = hold

    async def cancel(self, run_id: RunId) -> bool:
        self.hold.release.set()
        return False


async def _at_the_model(app: FakeApp) -> tuple[Organization, Run, Hold, asyncio.Task[Run]]:
    """A run executing here, held in its model call."""
    org, _, thread = await setup(app)
    run = (await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="x"))).run
    hold = Hold()
    app.model.then(hold, answer("late"))
    task = asyncio.create_task(app.execute_run().execute(org.id, run.id))
    await hold.received.wait()
    return org, run, hold, task


async def test_a_run_executing_elsewhere_stops_at_its_next_step_and_is_answered_cancelled(app: FakeApp) -> None:
    org, run, hold, task = await _at_the_model(app)
    cancelled = await CancelRun(app.uow, app.clock, app.bus, Elsewhere(hold)).execute(member(org), run.id)
    assert status(cancelled) is RunStatus.CANCELLED  # answered once the run recorded its end
    assert status(await task) is RunStatus.CANCELLED


async def test_a_run_executing_elsewhere_that_does_not_end_in_time_is_answered_as_it_is(app: FakeApp) -> None:
    org, run, hold, task = await _at_the_model(app)
    marked = await CancelRun(app.uow, app.clock, app.bus, app.executor, stop_wait_seconds=0).execute(
        member(org), run.id
    )
    assert status(marked) is RunStatus.IN_PROGRESS and marked.cancel_requested
    hold.release.set()
    assert status(await task) is RunStatus.CANCELLED  # at its next step


async def test_another_organizations_run_cannot_be_cancelled(app: FakeApp) -> None:
    org, _, thread = await setup(app)
    run = (await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="x"))).run
    with pytest.raises(RunNotFound):
        await cancel(app).execute(member(await app.organization()), run.id)


# -- FollowRun ------------------------------------------------------------------------------------------


async def test_a_follower_gets_what_happened_then_what_happens_until_the_run_ends(app: FakeApp) -> None:
    org, _, thread = await setup(app)
    run = (await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="x"))).run
    app.model.then(answer("Hello there"))
    following = await FollowRun(app.uow, app.bus).execute(member(org), run.id)
    received: list[RunEvent] = []

    async def follow() -> None:
        async with following as follower:
            async for event in follower.events(heartbeat=60):
                assert event is not None
                received.append(event)

    listener = asyncio.create_task(follow())
    await app.execute_run().execute(org.id, run.id)
    await listener
    assert [e.type.value for e in received] == [
        "run.created",
        "run.in_progress",
        "message.delta",
        "message.delta",
        "run.completed",
    ]
    assert [e.seq for e in received] == [1, 2, 3, 4, 5]


async def test_a_follower_that_subscribes_while_the_run_goes_on_misses_nothing(app: FakeApp) -> None:
    org, _, thread = await setup(app)
    run = (await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="x"))).run
    app.model.then(answer("Hello there"))
    bus = AfterSubscribing(app.bus, lambda: app.execute_run().execute(org.id, run.id))
    async with await FollowRun(app.uow, bus).execute(member(org), run.id) as follower:
        events = [e async for e in follower.events(heartbeat=60) if e is not None]
    assert [e.type.value for e in events] == [
        "run.created",
        "run.in_progress",
        "message.delta",
        "message.delta",
        "run.completed",
    ]


async def test_a_follower_of_an_ended_run_gets_its_stored_events_after_a_sequence_number(app: FakeApp) -> None:
    org, _, thread = await setup(app)
    run = (await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="x"))).run
    await cancel(app).execute(member(org), run.id)
    fresh = FakeApp(store=app.store)  # another process: its bus has nothing of this run
    following = await FollowRun(fresh.uow, fresh.bus).execute(member(org), run.id, after_seq=1)
    async with following as follower:
        events = [e async for e in follower.events(heartbeat=60)]
    assert [e.type.value for e in events if e is not None] == ["run.cancelled"]
    with pytest.raises(RunNotFound):
        await FollowRun(fresh.uow, fresh.bus).execute(member(await fresh.organization()), run.id)


# -- RecoverRuns, GetRun, ListRuns ----------------------------------------------------------------------


async def test_recovery_resubmits_queued_runs_and_fails_interrupted_ones(app: FakeApp) -> None:
    org, agent, thread = await setup(app)
    queued = (await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="x"))).run
    second = await app.thread(agent)
    left = builders.run(org.id, second.id, agent.id)
    left.start(app.clock.now())
    async with app.uow as uow:
        await uow.runs.add(left)
        await uow.commit()
    restarted = FakeApp(store=app.store)
    assert await RecoverRuns(restarted.uow, restarted.clock, restarted.bus, restarted.executor).execute() == (1, 1)
    assert restarted.executor.submitted == [(org.id, queued.id)]
    failed = await stored(app, left)
    assert status(failed) is RunStatus.FAILED and failed.error is not None and failed.error.code == "interrupted"
    [event] = restarted.bus.published
    assert isinstance(event.payload, RunFailed) and event.seq == UNSTORED_SEQS + 1  # past what it may have sent


async def test_recovery_ends_a_sub_agents_queued_run_instead_of_executing_it_for_no_one(app: FakeApp) -> None:
    """A sub-agent's run is queued in the process of the run that delegated to it, and executes there: found queued
    at start, the run waiting for its answer is gone (interrupted by the same recovery)."""
    org, agent, thread = await setup(app)
    parent = builders.run(org.id, thread.id, agent.id)
    parent.start(app.clock.now())
    child = builders.run(org.id, (await app.thread(agent)).id, agent.id, parent_run_id=parent.id)
    async with app.uow as uow:
        for run in (parent, child):
            await uow.runs.add(run)
        await uow.commit()
    restarted = FakeApp(store=app.store)
    assert await RecoverRuns(restarted.uow, restarted.clock, restarted.bus, restarted.executor).execute() == (2, 0)
    assert restarted.executor.submitted == []
    for run in (parent, child):
        ended = await stored(app, run)
        assert status(ended) is RunStatus.FAILED and ended.error is not None and ended.error.code == "interrupted"


async def test_recovery_ends_a_run_left_in_progress_after_its_cancel_was_requested_cancelled(app: FakeApp) -> None:
    org, agent, thread = await setup(app)
    left = builders.run(org.id, thread.id, agent.id)
    left.start(app.clock.now())
    async with app.uow as uow:
        await uow.runs.add(left)
        await uow.runs.request_cancel(org.id, left.id)  # stored; the process stopped before the run recorded it
        await uow.commit()
    restarted = FakeApp(store=app.store)
    assert await RecoverRuns(restarted.uow, restarted.clock, restarted.bus, restarted.executor).execute() == (1, 0)
    assert status(await stored(app, left)) is RunStatus.CANCELLED
    [event] = restarted.bus.published
    assert event.type.value == "run.cancelled"


async def test_in_worker_mode_the_runs_a_silent_process_left_without_a_job_end_and_no_others() -> None:
    """Worker mode: a run with no job whose process is silent was executing for a caller that is gone (a published
    agent called over MCP, a sub-agent's run): it ends, queued or in progress, failed interrupted (a sub-agent's
    worker_lost, cancelled when that was asked); a run with a job, or whose process lives, is left alone, and no
    run is given to a worker."""
    app = FakeApp(store=Store(run_jobs={}))
    org, agent, _ = await setup(app)
    runs: dict[str, Run] = {}
    async with app.uow as uow:
        for name in ("queued", "called", "sub_agent", "cancel", "with_a_job", "live_holder"):
            thread = builders.thread(org.id, agent_id=agent.id)
            parent = runs["called"].id if name == "sub_agent" else None
            run = builders.run(org.id, thread.id, agent.id, parent_run_id=parent, cancel_requested=name == "cancel")
            if name != "queued":
                run.start(app.clock.now())
            await uow.threads.add(thread)
            await uow.runs.add(run)
            if name == "with_a_job":
                await uow.run_jobs.add(org.id, run.id)
            if name != "live_holder":
                app.store.silent_holders.add(run.id)
            runs[name] = run
        await uow.commit()
    worker = FakeApp(store=app.store)
    recover = RecoverRuns(worker.uow, worker.clock, worker.bus, worker.executor)
    assert await recover.end_stranded(silent_seconds=15, batch=2) == 4
    ended = {name: await stored(app, run) for name, run in runs.items()}
    assert {name: (status(r), r.error.code if r.error else None) for name, r in ended.items()} == {
        "queued": (RunStatus.FAILED, "interrupted"),
        "called": (RunStatus.FAILED, "interrupted"),
        "sub_agent": (RunStatus.FAILED, "worker_lost"),
        "cancel": (RunStatus.CANCELLED, None),
        "with_a_job": (RunStatus.IN_PROGRESS, None),
        "live_holder": (RunStatus.IN_PROGRESS, None),
    }
    assert worker.executor.submitted == []
    assert sorted(e.run_id for e in worker.bus.published) == sorted(
        runs[n].id for n in ("queued", "called", "sub_agent", "cancel")
    )
    assert all(e.seq > UNSTORED_SEQS for e in worker.bus.published)  # past what their process may have sent
    assert await recover.end_stranded(silent_seconds=15) == 0  # ended once


async def test_recovery_handles_every_stranded_run_not_just_a_first_batch(app: FakeApp) -> None:
    org, agent, _ = await setup(app)
    stranded = []
    async with app.uow as uow:
        for index in range(25):
            thread = builders.thread(org.id, agent_id=agent.id)
            run = builders.run(org.id, thread.id, agent.id)
            if index % 2:
                run.start(app.clock.now())
            await uow.threads.add(thread)
            await uow.runs.add(run)
            stranded.append(run)
        await uow.commit()
    restarted = FakeApp(store=app.store)
    recover = RecoverRuns(restarted.uow, restarted.clock, restarted.bus, restarted.executor)
    assert await recover.execute(batch=10) == (12, 13)
    assert sorted(run_id for _, run_id in restarted.executor.submitted) == sorted(r.id for r in stranded[::2])


async def test_runs_are_read_and_listed_within_their_organization(app: FakeApp) -> None:
    org, agent, thread = await setup(app)
    first = (await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="x"))).run
    await cancel(app).execute(member(org), first.id)
    second = (await create(app).execute(CreateRunCommand(caller=member(org), thread_id=thread.id, input="y"))).run
    other = await app.organization()
    assert (await GetRun(app.uow).execute(member(org), first.id)).id == first.id
    with pytest.raises(RunNotFound):
        await GetRun(app.uow).execute(member(other), first.id)
    listed = await ListRuns(app.uow).execute(member(org), PageRequest(limit=1))
    assert [r.id for r in listed.items] == [first.id] and listed.next_cursor is not None
    rest = await ListRuns(app.uow).execute(member(org), PageRequest(limit=1, cursor=listed.next_cursor))
    assert [r.id for r in rest.items] == [second.id] and rest.next_cursor is None
    queued_only = await ListRuns(app.uow).execute(member(org), PageRequest(), RunFilter(status=RunStatus.QUEUED))
    assert [r.id for r in queued_only.items] == [second.id]
    by_agent = await ListRuns(app.uow).execute(admin(org), PageRequest(), RunFilter(agent_id=agent.id))
    assert len(by_agent.items) == 2
    assert (await ListRuns(app.uow).execute(member(other), PageRequest())).items == []
    with pytest.raises(ThreadNotFound):
        await ListRuns(app.uow).execute(member(other), PageRequest(), RunFilter(thread_id=thread.id))
    with pytest.raises(ThreadNotFound):
        await ListRuns(app.uow).execute(member(org), PageRequest(), RunFilter(thread_id=ThreadId(app.ids.new())))


def test_a_waiting_run_knows_which_calls_it_waits_for() -> None:
    org_id = builders.organization().id
    thread = builders.thread(org_id)
    run = builders.run(org_id, thread.id, builders.agent(org_id).id)
    run.start(builders.NOW)
    pending = PendingToolCall(id="a", name="t", arguments={}, type="client")
    run.require_action((pending,), builders.NOW)
    assert run.resume(["a"], builders.NOW) == {"a": pending} and status(run) is RunStatus.IN_PROGRESS
    with pytest.raises(RunNotWaiting):
        run.resume(["a"], builders.NOW)


@pytest.mark.timeout(60)  # were the model called only after the commit, they would wait for each other
async def test_a_run_stopped_before_its_creation_commits_writes_nothing_when_the_commit_fails(
    app: FakeApp, caplog: pytest.LogCaptureFixture
) -> None:
    thinking = Hold()
    at_once = await creating_at_once(app, thinking, answer("Hello!"))
    app.store.failing_commits = 1

    await thinking.received.wait()
    [execution] = at_once.slot.executions
    execution.cancel()  # e.g. the server stops while the run's first model call is out
    at_once.commit.set()
    with pytest.raises(StorageUnavailable):
        await at_once.creating
    await asyncio.wait({execution})

    assert app.bus.published == [] and app.store.runs == {} and app.store.run_events == {}
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
