"""A run's events: numbered in order, stored with what they announce, published after commit."""

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime

from application.ports.execution import RunEventBus
from application.ports.persistence import ClaimedRun, UnitOfWork
from application.ports.system import Clock
from domain.ids import OrgId, RunId
from domain.run_events import RunEvent, RunEventPayload, run_ended
from domain.runs import Run

UNSTORED_SEQS = 100_000
"""How far past its last stored event a holder may number the events it publishes without storing them
(text deltas, tool results before their step is stored); and so how far past the last stored event the
numbering jumps when a run's events go on after a holder that may have published such events."""


class RunNotCreated(Exception):
    """The transaction creating a run that had begun to execute did not commit: the run does not exist, and its
    execution stops without a word (see RunStarter)."""


class RunEventStream:
    """Numbers one run's events in order. Events are stored in the unit of work that records what they
    announce (text deltas are not stored: the message they build is), and published after commit.

    The invariant: a seq a follower can see is never given to another event of the run, so a follower drops
    nothing as a duplicate and `Last-Event-ID` resumes where it left off. Numbers are handed out one after
    the other by whoever holds the run; unstored events take numbers too, so the stored events of a run have
    gaps where its deltas were. A holder publishes unstored events only within UNSTORED_SEQS of its last
    stored event (a longer run of deltas goes unpublished; the stored message still has all the text). So
    whoever goes on with a run that was in progress, after a holder that may have stopped without a last
    word (lost, or handed back; the database cannot tell that from a run resumed by its client's tool
    results), starts UNSTORED_SEQS past the last stored event (`resume(..., past_unstored=True)`) and stores
    an event there at once, before it publishes anything unstored: the next one to go on after it starts
    past that one. Followers see a gap in the numbers there, never a number twice; `Last-Event-ID` with any
    number a follower saw resumes after it.

    What a holder published unstored is sent to the deployment's other processes before it commits an event
    after it (`sent`): a follower there that reads that event from storage can wait for the unstored ones.
    """

    def __init__(self, org_id: OrgId, run_id: RunId, last_seq: int, bus: RunEventBus, clock: Clock) -> None:
        self._org_id, self._run_id = org_id, run_id
        self._seq = self._stored = last_seq
        self._bus, self._clock = bus, clock
        self._unstored = self._sent = 0
        """Events published unstored, and of them those the bus has said were sent."""
        self._creation: asyncio.Future[None] | None = None

    def created_by(self, creation: "asyncio.Future[None]") -> None:
        """The run executes before the transaction creating it has committed: nothing is published before that
        transaction's own events are (`creation` is done then), or at all if it did not commit (it fails with
        RunNotCreated)."""
        self._creation = creation

    @classmethod
    async def resume(
        cls,
        uow: UnitOfWork,
        org_id: OrgId,
        run_id: RunId,
        bus: RunEventBus,
        clock: Clock,
        *,
        past_unstored: bool = False,
        last_seq: int | None = None,
    ) -> "RunEventStream":
        """Numbering after the run's last stored event (`last_seq` when the caller read it already); with
        `past_unstored`, after any number a holder that stopped without a last word may have published (the
        caller stores the next event at once)."""
        if last_seq is None:
            last_seq = await uow.run_events.last_seq(run_id)
        return cls(org_id, run_id, last_seq + UNSTORED_SEQS if past_unstored else last_seq, bus, clock)

    def mark(self) -> tuple[int, int]:
        """Where the numbering stands, to `rewind` to when nothing numbered since was stored or published."""
        return self._seq, self._stored

    def rewind(self, mark: tuple[int, int]) -> None:
        self._seq, self._stored = mark

    def make(self, payload: RunEventPayload) -> RunEvent:
        self._seq += 1
        return RunEvent(run_id=self._run_id, seq=self._seq, payload=payload, created_at=self._clock.now())

    async def sent(self) -> None:
        """Returns once what this stream published unstored until now has left the process (see the class's
        docstring). The caller is about to commit an event numbered after it."""
        published = self._unstored
        if self._sent < published:
            await self._bus.sent()
            self._sent = max(self._sent, published)

    async def record(self, uow: UnitOfWork, payload: RunEventPayload) -> RunEvent:
        while self._sent < self._unstored:  # again if more was published meanwhile (a parallel tool call's progress)
            await self.sent()  # (callers on a run's hot path wait before their transaction: then this is at once)
        event = self.make(payload)  # no wait in between: nothing is published unsent before it
        await uow.run_events.add(event, self._org_id)
        self._stored = event.seq
        return event

    async def publish(self, *events: RunEvent) -> None:
        if self._creation is not None:
            await asyncio.shield(self._creation)  # RunNotCreated when it did not commit
            self._creation = None
        for event in events:
            if event.seq > self._stored + UNSTORED_SEQS:
                continue  # unstored, and too far past the last stored event for a successor to step over
            if event.seq > self._stored:
                self._unstored += 1
            await self._bus.publish(event)


async def store_ending(
    uow: UnitOfWork,
    run: Run,
    bus: RunEventBus,
    clock: Clock,
    *,
    after_holder: bool = False,
    last_seq: int | None = None,
) -> RunEvent:
    """Inside the caller's unit of work: store a run that just ended (not by its own loop: cancelled while
    it waited, interrupted by a stopped process) with the event that says so. `after_holder`: the run was
    in progress, and its holder may have published events it did not store. The caller publishes the event
    after commit."""
    events = await RunEventStream.resume(
        uow, run.org_id, run.id, bus, clock, past_unstored=after_holder, last_seq=last_seq
    )
    event = await events.record(uow, run_ended(run))
    await uow.runs.save(run)
    return event


async def store_lost_end(
    uow: UnitOfWork, claimed: ClaimedRun, code: str, message: str, bus: RunEventBus, clock: Clock
) -> RunEvent:
    """Inside the caller's unit of work, for a run just claimed from a process lost before it recorded an end: the
    run ends as Run.end_after_its_process says, its event numbered past any that process published unstored."""
    claimed.run.end_after_its_process(code, message, clock.now())
    return await store_ending(uow, claimed.run, bus, clock, after_holder=True, last_seq=claimed.last_event_seq)


async def end_claimed(
    uow: UnitOfWork,
    claim: Callable[[UnitOfWork], Awaitable[ClaimedRun | None]],
    ending: Callable[[Run, datetime], bool],
    bus: RunEventBus,
    clock: Clock,
) -> tuple[Run | None, RunEvent | None]:
    """A unit of work of its own: the run claimed (whoever held it can no longer write it) and, if it still
    executes (Run.executes: one that ended meanwhile is left as it is), ended by `ending` (given the run and the
    time; False: it leaves the run as it is), stored with its event numbered past any its previous holder published
    unstored, which is published after commit; nothing is committed when it does not end. The run as stored (None:
    it was not claimed), and the event (None: it did not end)."""
    async with uow as unit:
        claimed = await claim(unit)
        if claimed is None:
            return None, None
        run = claimed.run
        if not run.executes or not ending(run, clock.now()):
            run.lease -= 1  # not claimed after all (nothing is committed)
            return run, None
        event = await store_ending(unit, run, bus, clock, after_holder=True, last_seq=claimed.last_event_seq)
        await unit.commit()
    await bus.publish(event)
    return run, event
