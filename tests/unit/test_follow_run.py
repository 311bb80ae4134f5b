"""Following a run that goes on as the follower arrives, on fakes: each event once, and a heartbeat while
nothing happens."""

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from types import TracebackType

from application.ports.execution import RunSubscription
from application.runs.create_run import CreateRun, CreateRunCommand
from application.runs.events import RunEventStream
from application.runs.follow_run import FollowRun
from domain.ids import MessageId, RunId
from domain.run_events import MessageDelta, RunEvent, RunEventType, RunInProgress
from domain.runs import ClientTool, Run
from tests.unit.fakes.app import FakeApp, member
from tests.unit.fakes.persistence import FakeUnitOfWork
from tests.unit.fakes.ports import AfterSubscribing, Hold, RecordingBus, answer, call, calls
from tests.unit.test_run_leases import stored_events


class _StartsTheRunWhileSubscribing(AfterSubscribing):
    """A bus on which the run starts (and stops at the model's call) right after a follower subscribes,
    before it reads storage: the events of that start are both stored and on their way live."""

    def __init__(self, app: FakeApp, run: Run, thinking: Hold) -> None:
        super().__init__(app.bus, self._start)
        self._app, self._run, self._thinking = app, run, thinking
        self.task: asyncio.Task[Run | None] | None = None

    async def _start(self) -> None:
        self.task = asyncio.create_task(self._app.execute_run().execute(self._run.org_id, self._run.id))
        await self._thinking.received.wait()


async def queued_run(app: FakeApp, client_tools: tuple[ClientTool, ...] = ()) -> Run:
    org = await app.organization()
    thread = await app.thread(await app.agent(org))
    command = CreateRunCommand(caller=member(org), thread_id=thread.id, input="Hi", client_tools=client_tools)
    return (await CreateRun(app.uow, app.clock, app.ids, app.bus, app.executor).execute(command)).run


async def _starting_as_followed() -> tuple[FakeApp, Run, Hold, _StartsTheRunWhileSubscribing]:
    """A queued run whose model answers "Hello" once `thinking` is released, on a bus that starts it as a follower
    subscribes."""
    app = FakeApp()
    thinking = Hold()
    app.model.then(thinking, answer("Hello"))
    run = await queued_run(app)
    return app, run, thinking, _StartsTheRunWhileSubscribing(app, run, thinking)


async def test_a_follower_arriving_as_the_run_starts_gets_each_event_once_and_heartbeats_meanwhile() -> None:
    app, run, thinking, bus = await _starting_as_followed()
    received: list[str] = []
    async with await FollowRun(app.uow, bus).execute(member(run.org_id), run.id) as follower:
        async for event in follower.events(heartbeat=0.01):
            if event is None:  # the model is still thinking: nothing to tell but that the stream lives
                received.append("heartbeat")
                assert received.count("heartbeat") == 1, "the events after the model's answer did not come"
                thinking.release.set()
                assert bus.task is not None
                await bus.task
                continue
            received.append(event.type.value)
    assert received == [
        "run.created",
        "run.in_progress",
        "heartbeat",
        "message.delta",
        "message.delta",
        "run.completed",
    ]


async def test_the_events_that_arrived_while_the_follower_was_away_come_as_one_batch() -> None:
    app, run, thinking, bus = await _starting_as_followed()
    batches: list[list[str] | None] = []
    async with await FollowRun(app.uow, bus).execute(member(run.org_id), run.id) as follower:
        async for batch in follower.batches(heartbeat=0.01):
            batches.append(None if batch is None else [event.type.value for event in batch])
            if batch is None:
                thinking.release.set()
                assert bus.task is not None
                await bus.task  # the run ends before the follower looks again
    assert batches == [
        ["run.created", "run.in_progress"],
        None,
        ["message.delta", "message.delta", "run.completed"],
    ]


class _Deaf:
    """A subscription that hears nothing: the process's link to the process executing the run is down."""

    backlog: tuple[RunEvent, ...] = ()

    async def next(self) -> RunEvent:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    def received(self) -> list[RunEvent]:
        return []


class _DeafBus:
    async def publish(self, event: RunEvent) -> None:
        pass

    async def sent(self) -> None:
        pass

    async def received_all(self) -> None:
        pass

    @contextlib.asynccontextmanager
    async def subscribe(self, run_id: RunId) -> AsyncIterator[RunSubscription]:
        yield _Deaf()


async def test_a_follower_that_hears_nothing_live_still_gets_the_stored_events_at_the_next_heartbeat() -> None:
    app = FakeApp()
    thinking = Hold()
    app.model.then(thinking, answer("Hello"))
    run = await queued_run(app)
    executing = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
    await thinking.received.wait()
    received: list[str] = []
    async with await FollowRun(app.uow, _DeafBus()).execute(member(run.org_id), run.id) as follower:
        async for event in follower.events(heartbeat=0.01):
            if event is None:
                if not thinking.release.is_set():
                    thinking.release.set()
                    await executing
                continue
            received.append(event.type.value)
    assert received == ["run.created", "run.in_progress", "run.completed"]


class _WaitsRightAfterTheRead(FakeUnitOfWork):
    """Storage on which the run, in progress as the follower reads it, stops to wait for the client right after
    that read: the follower learns of the wait only from the bus."""

    def __init__(self, app: FakeApp, thinking: Hold, executing: "asyncio.Task[Run | None]") -> None:
        super().__init__(app.store, read_only=True)
        self._thinking, self._executing = thinking, executing

    def read_only(self) -> "_WaitsRightAfterTheRead":
        return self

    async def __aenter__(self) -> "_WaitsRightAfterTheRead":
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self._thinking.release.is_set():
            self._thinking.release.set()
            await self._executing


async def test_a_follower_that_arrives_as_the_run_stops_to_wait_for_the_client_ends_at_the_wait() -> None:
    app = FakeApp()
    thinking = Hold()
    app.model.then(thinking, calls(call("get_location")))
    tool = ClientTool(name="get_location", description="Where the user is", parameters={"type": "object"})
    run = await queued_run(app, client_tools=(tool,))
    executing = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
    await thinking.received.wait()
    received: list[str] = []
    storage = _WaitsRightAfterTheRead(app, thinking, executing)
    async with await FollowRun(storage, app.bus).execute(member(run.org_id), run.id) as follower:
        async for event in follower.events(heartbeat=0.01):
            assert event is not None, f"the follower waits on after {received}"
            received.append(event.type.value)
    assert received[-1] == "run.requires_action"
    assert received.count("run.requires_action") == 1


class _InProgressComesLate(RecordingBus):
    """A bus on which a run's `run.in_progress` reaches followers after the event that follows it, as a run's
    events published by two processes (the API's, a worker's) may arrive through two connections."""

    def __init__(self) -> None:
        super().__init__()
        self._late: RunEvent | None = None

    async def publish(self, event: RunEvent) -> None:
        if event.type is RunEventType.IN_PROGRESS and self._late is None:
            self._late = event
            return
        await super().publish(event)
        if self._late is not None:
            late, self._late = self._late, None
            await super().publish(late)


async def test_a_live_event_that_comes_after_a_later_one_is_not_lost() -> None:
    app = FakeApp(bus=_InProgressComesLate())
    app.model.then(answer("Hello"))
    run = await queued_run(app)
    received: list[str] = []
    async with await FollowRun(app.uow, app.bus).execute(member(run.org_id), run.id) as follower:
        executing = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
        async for event in follower.events(heartbeat=5):
            assert event is not None
            received.append(f"{event.seq} {event.type.value}")
        await executing
    assert received == ["1 run.created", "2 run.in_progress", "3 message.delta", "4 message.delta", "5 run.completed"]


class _SendsSlowly(RecordingBus):
    """A bus whose events leave the process only when the test lets them (`sent` waits for `go`)."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting, self.go = asyncio.Event(), asyncio.Event()

    async def sent(self) -> None:
        self.waiting.set()
        await self.go.wait()


async def test_a_run_stores_what_follows_its_text_deltas_only_once_they_left_the_process() -> None:
    """A follower in another process that reads the run's end from storage can then count on the deltas before it
    being on their way (it waits for them with the bus's `received_all`)."""
    bus = _SendsSlowly()
    app = FakeApp(bus=bus)
    app.model.then(answer("Hello"))
    run = await queued_run(app)
    executing = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
    await asyncio.wait_for(bus.waiting.wait(), 10)
    assert "message.delta" in bus.types(run.id)
    assert await stored_events(app, run) == ["run.created", "run.in_progress"]  # not run.completed yet
    bus.go.set()
    await executing
    assert await stored_events(app, run) == ["run.created", "run.in_progress", "run.completed"]


async def test_two_writes_of_a_run_at_once_both_wait_until_its_deltas_left_the_process() -> None:
    """Side by side (a run's parallel tool calls: one asks its user a question as another's write comes): the
    second write does not store its event while the first still waits for the deltas to be sent."""
    bus = _SendsSlowly()
    app = FakeApp(bus=bus)
    run = await queued_run(app)
    events = RunEventStream(run.org_id, run.id, 1, bus, app.clock)
    await events.publish(events.make(MessageDelta(message_id=MessageId(uuid.uuid4()), text="Hi")))

    async def write() -> None:
        async with app.uow as uow:
            await events.record(uow, RunInProgress.of(run))
            await uow.commit()

    first = asyncio.create_task(write())
    await asyncio.wait_for(bus.waiting.wait(), 10)
    bus.waiting.clear()
    second = asyncio.create_task(write())
    await asyncio.wait_for(bus.waiting.wait(), 10)
    assert await stored_events(app, run) == ["run.created"]
    bus.go.set()
    await asyncio.gather(first, second)
    assert await stored_events(app, run) == ["run.created", "run.in_progress", "run.in_progress"]


async def test_the_creator_of_a_run_keeps_a_delta_that_came_before_the_stored_event_it_lacked() -> None:
    app = FakeApp()
    run = await queued_run(app)  # run.created, stored and published here
    events = RunEventStream(run.org_id, run.id, 1, app.bus, app.clock)
    async with app.uow as uow:  # run.in_progress, stored elsewhere: not published here
        await events.record(uow, RunInProgress.of(run))
        await uow.commit()
    delta = events.make(MessageDelta(message_id=MessageId(uuid.uuid4()), text="He"))
    # The delta arrives as the follower subscribes; run.in_progress, sent by another connection, has not yet.
    follow = FollowRun(app.uow, AfterSubscribing(app.bus, lambda: app.bus.publish(delta)))
    async with await follow.execute(member(run.org_id), run.id, created=run) as follower:
        history = [(e.seq, e.type.value) for e in follower.history]
    assert history == [(1, "run.created"), (2, "run.in_progress"), (3, "message.delta")]
