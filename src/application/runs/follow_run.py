"""Following a run: its events so far, then live."""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from application.caller import Caller
from application.errors import RunNotFound, StorageUnavailable
from application.ports.execution import RunEventBus, RunSubscription
from application.ports.persistence import UnitOfWork
from domain.ids import RunId
from domain.run_events import RunEvent, RunEventType
from domain.runs import Run, RunStatus

StoredAfter = Callable[[int], Awaitable[Sequence[RunEvent]]]
"""The run's stored events after a seq."""


async def _nothing_stored(_after_seq: int) -> Sequence[RunEvent]:
    return ()


@dataclass
class RunFollower:
    history: list[RunEvent]
    subscription: RunSubscription
    settled: bool
    """True when the run had ended (or was waiting) as the follower arrived: unless events came after that, the
    history is all there is."""
    answered: bool = False
    """True when the wait for the client that ends the history is over (the run went on after it, answered): its
    next events come live."""
    stored_after: StoredAfter = _nothing_stored
    """Read at each heartbeat: a stored event the bus never delivered (published while this process's link
    to the other processes was down) still reaches the follower, at the latest one heartbeat later."""

    async def events(self, heartbeat: float, until: asyncio.Event | None = None) -> AsyncIterator[RunEvent | None]:
        """The history, then live events (None after `heartbeat` seconds of silence, once what storage has
        since then is given) until one ends it, or until `until` is set (the process is stopping: the
        follower comes back with Last-Event-ID). Each event once, in order of seq: a live event that skips
        over seqs brings the stored events it skipped first."""
        async for batch in self.batches(heartbeat, until):
            if batch is None:
                yield None
                continue
            for event in batch:
                yield event

    async def batches(
        self, heartbeat: float, until: asyncio.Event | None = None
    ) -> AsyncIterator[list[RunEvent] | None]:
        """The same as `events`, each time with every event that has arrived meanwhile (never empty), so that a
        stream can send them at once."""
        if self.history:
            yield list(self.history)
        last = max((past.seq for past in self.history), default=0)
        if self._over():
            return
        stopping: asyncio.Future[Any] = asyncio.ensure_future((until or asyncio.Event()).wait())
        try:
            while not stopping.done():
                arrived = self.subscription.received()
                if not arrived:
                    event = await self._next(heartbeat, stopping)
                    if event is None:
                        if stopping.done():
                            continue
                        missed, ended = _after(await self._stored_after(last), last)
                        if missed:
                            last = missed[-1].seq
                            yield missed
                        if ended:
                            return
                        yield None
                        continue
                    arrived = [event, *self.subscription.received()]
                batch, ended = _after(arrived, last)
                if batch and batch[0].seq > last + 1:  # events of two processes may arrive out of order (a worker's
                    # before the API's last ones): those skipped over are stored (published after their commit)
                    skipped = [e for e in await self._stored_after(last) if e.seq < batch[0].seq]
                    if skipped:
                        batch, ended = _after(_merged(skipped, arrived), last)
                if batch:
                    last = batch[-1].seq
                    yield batch
                if ended:
                    return
        finally:
            stopping.cancel()

    def _over(self) -> bool:
        """Whether the history is all there is: it ends the stream, or nothing came after a run that had ended."""
        if not self.history:
            return self.settled
        final = self.history[-1]
        return final.type.ends_stream and not (final.type is RunEventType.REQUIRES_ACTION and self.answered)

    async def _stored_after(self, seq: int) -> Sequence[RunEvent]:
        try:
            return await self.stored_after(seq)
        except StorageUnavailable:
            return ()  # the live events go on; storage is read again at the next heartbeat

    async def _next(self, heartbeat: float, stopping: "asyncio.Future[Any]") -> RunEvent | None:
        """The next live event, or None after `heartbeat` seconds of silence or once stopping."""
        waiting: asyncio.Future[Any] = asyncio.ensure_future(self.subscription.next())
        done, _ = await asyncio.wait({waiting, stopping}, timeout=heartbeat, return_when=asyncio.FIRST_COMPLETED)
        if waiting in done:
            event: RunEvent = waiting.result()
            return event
        waiting.cancel()
        return None


class FollowRun:
    """A run's events for a follower: what happened so far (from the bus's backlog where it still has
    it, text deltas included, else from storage), then what happens live, until the run ends or
    waits for the client."""

    def __init__(self, uow: UnitOfWork, bus: RunEventBus) -> None:
        self._uow, self._bus = uow, bus

    async def execute(
        self, caller: Caller, run_id: RunId, after_seq: int = 0, *, created: Run | None = None
    ) -> AbstractAsyncContextManager[RunFollower]:
        """Subscribes before reading what is stored, so nothing falls between the two. `created`: the run the
        caller has just created; while the bus holds every event of it so far, storage is not read again."""
        stack = AsyncExitStack()
        subscription = await stack.enter_async_context(self._bus.subscribe(run_id))
        try:
            follower = await self._follower(caller, run_id, after_seq, created, subscription)
        except BaseException:
            await stack.aclose()
            raise
        return _holding(follower, stack)

    async def _follower(
        self, caller: Caller, run_id: RunId, after_seq: int, created: Run | None, subscription: RunSubscription
    ) -> RunFollower:
        async def stored_after(seq: int) -> Sequence[RunEvent]:
            async with self._uow.read_only() as uow:
                return await uow.run_events.list(caller.org_id, run_id, after_seq=seq)

        arrived = subscription.received()  # (taking them: kept for the history whichever way it is made)
        if created is not None and created.id == run_id and created.org_id == caller.org_id:
            held = [e for e in [*subscription.backlog, *arrived] if e.seq > after_seq]
            if _unbroken(held, after_seq):
                return RunFollower(history=held, subscription=subscription, settled=False, stored_after=stored_after)
        async with self._uow.read_only() as uow:
            run = await uow.runs.get(caller.org_id, run_id)
            stored = await uow.run_events.list(caller.org_id, run_id, after_seq=after_seq) if run else []
        if run is None:
            raise RunNotFound(f"run {run_id} not found")
        held = [e for e in [*subscription.backlog, *arrived, *subscription.received()] if e.seq > after_seq]
        history = _merged(stored, held)
        if history and not _unbroken(history, after_seq):
            # Gaps: text deltas the bus never had (or no longer has), or ones on their way from the process that
            # executes the run (sent before what it stored next, but maybe not received here yet).
            await self._bus.received_all()
            history = _merged(stored, [*held, *(e for e in subscription.received() if e.seq > after_seq)])
        settled = run.status.is_terminal or run.status is RunStatus.REQUIRES_ACTION
        answered = False
        if history and history[-1].type is RunEventType.REQUIRES_ACTION and not settled:
            answered = await self._went_on_after(caller, run_id)
        return RunFollower(
            history=history, subscription=subscription, settled=settled, answered=answered, stored_after=stored_after
        )

    async def _went_on_after(self, caller: Caller, run_id: RunId) -> bool:
        """Whether a run whose last event known is a wait for the client has gone on since (answered). The run as
        read before cannot tell: its status may be older than the events read after it, or than the ones the bus
        holds (the wait came meanwhile). Read now, after the wait was stored, a run no longer waiting was
        answered. One that waits again may wait for a later call: the follower stops at the first wait then,
        as if it had arrived a moment earlier."""
        async with self._uow.read_only() as uow:
            run = await uow.runs.get(caller.org_id, run_id)
        return run is not None and run.status is not RunStatus.REQUIRES_ACTION


def _after(events: Sequence[RunEvent], last: int) -> tuple[list[RunEvent], bool]:
    """The events numbered past `last`, up to the first that ends the stream; and whether one did."""
    taken: list[RunEvent] = []
    for event in events:
        if event.seq <= last:
            continue
        last = event.seq
        taken.append(event)
        if event.type.ends_stream:
            return taken, True
    return taken, False


def _unbroken(held: Sequence[RunEvent], after_seq: int) -> bool:
    """Whether `held` is every event after `after_seq` so far: published after commit, in order, so the bus
    has them all unless its backlog dropped some (a later one comes live, through the subscription)."""
    return bool(held) and all(event.seq == after_seq + 1 + index for index, event in enumerate(held))


def _merged(stored: Sequence[RunEvent], held: Sequence[RunEvent]) -> list[RunEvent]:
    """The stored events and the ones only the bus holds (text deltas), in order. Storage was read after the
    subscription began, so it has every stored event the bus held, and more if the run went on meanwhile (the
    deltas of that are among the events the subscription received)."""
    by_seq = {e.seq: e for e in held}
    by_seq.update((e.seq, e) for e in stored)
    return [by_seq[seq] for seq in sorted(by_seq)]


@asynccontextmanager
async def _holding(follower: RunFollower, stack: AsyncExitStack) -> AsyncIterator[RunFollower]:
    async with stack:
        yield follower
