"""Starting a run once per idempotency key, for every way a run is asked for (the runs API, the
OpenAI-compatible routes): the key's run when it exists, else the run queued now, published and handed to the
executor. A request that loses the race for a key answers with the winner's run and queues nothing.

When this process executes runs and has a slot free for the organization, the run is started in the transaction
that creates it (stored in_progress, with what its execution reads) and executes at once: one transaction fewer
per run. Its execution begins as that transaction commits, not after: the model call needs nothing the commit
does, so it goes out while the commit is on its way. Its first write and its first published event wait until
the commit is done and the transaction's own events (run.created, run.in_progress) have been handed to the bus
(or publishing them failed: the run goes on, and followers read what they missed from storage); if the commit
fails or is cut short, the execution stops without writing or publishing anything (the model's answer is
dropped; its trace, marked "not created", is all that remains of it).

Otherwise the run is stored queued and submitted (in worker mode, its job is queued in the transaction that
stores it), and its execution starts it when its turn comes."""

import asyncio
from collections.abc import Awaitable, Callable

from application.errors import IdempotencyConflict, IdempotencyKeyReused, ThreadBusy
from application.ports.execution import RunEventBus, RunExecutor, RunSlot
from application.ports.limits import NoRunRateLimit, RunRateLimit
from application.ports.persistence import UnitOfWork
from application.runs.events import RunNotCreated
from application.runs.queueing import Queued, StartAtOnce
from application.runs.recorder import Began
from domain.ids import OrgId, RunId, ThreadId
from domain.runs import Run

Queue = Callable[[StartAtOnce | None], Awaitable["Queued | Run"]]
"""Queues the run in one transaction, started at once when given a StartAtOnce (queue_run's `start_on`), else for
the executor (queue_run's `to_executor`); answers the key's run instead when it appeared meanwhile."""


class _AtOnce:
    """A run about to be queued, to execute in the slot taken for it."""

    def __init__(self, slot: RunSlot, bus: RunEventBus) -> None:
        self._slot = slot
        self.started = False
        self.start_on = StartAtOnce(bus=bus, start=self._start, creation=asyncio.get_running_loop().create_future())

    def _start(self, run_id: RunId, began: Began) -> None:
        self._slot.start(run_id, began)
        self.started = True

    def settle(self, *, created: bool) -> None:
        """Once the queueing is over: the execution goes on or stops; an unused slot is given back."""
        creation = self.start_on.creation
        if not self.started:
            creation.cancel()  # nothing waits for it
            self._slot.release()
        elif not creation.done():
            if created:
                creation.set_result(None)
            else:
                creation.set_exception(RunNotCreated())


class RunStarter:
    def __init__(
        self, uow: UnitOfWork, bus: RunEventBus, executor: RunExecutor, rate_limit: RunRateLimit | None = None
    ) -> None:
        self._uow, self._bus, self._executor = uow, bus, executor
        self._rate_limit = rate_limit or NoRunRateLimit()

    async def start(
        self,
        org_id: OrgId,
        idempotency_key: str | None,
        digest: str | None,
        queue: Queue,
        thread_id: ThreadId | None = None,
    ) -> tuple[Run, bool]:
        """The run and whether this request created it. A key that started a run for another request (its
        digest differs; for a run stored before digests were, `thread_id` differs) is refused."""
        existing = await self._by_key(org_id, idempotency_key)
        if existing is not None:
            return _replayed(existing, idempotency_key, digest, thread_id), False
        await self._rate_limit.take(org_id)  # a replay above is not a new run
        slot = await self._executor.reserve(org_id)
        at_once = _AtOnce(slot, self._bus) if slot is not None else None
        created = False
        try:
            try:
                queued = await queue(at_once.start_on if at_once is not None else None)
            except (IdempotencyConflict, ThreadBusy):  # a request with the same key may have won the thread
                winner = await self._by_key(org_id, idempotency_key)
                if winner is None:
                    raise
                queued = winner
            if isinstance(queued, Run):  # the key's run: made while this request waited for the thread, or raced it
                return _replayed(queued, idempotency_key, digest, thread_id), False
            created, run = True, queued.run
            for event in queued.events:
                await self._bus.publish(event)
        finally:  # stored in_progress: it executes even if this request ends here (its events are stored)
            if at_once is not None:
                at_once.settle(created=created)
        if at_once is not None and at_once.started:
            # Where the commit did not wait (SQLite), the run's task has not run yet: it goes first, to its model
            # call, and this request's answer is written while the model thinks.
            await asyncio.sleep(0)
            return run, True
        if not queued.submitted:
            await self._executor.submit(run.org_id, run.id)
        return run, True

    async def _by_key(self, org_id: OrgId, idempotency_key: str | None) -> Run | None:
        if idempotency_key is None:
            return None
        async with self._uow.read_only() as uow:
            return await uow.runs.find_by_idempotency_key(org_id, idempotency_key)


def _replayed(run: Run, idempotency_key: str | None, digest: str | None, thread_id: ThreadId | None) -> Run:
    same = run.request_digest == digest if run.request_digest is not None else run.thread_id == thread_id
    if not same:
        raise IdempotencyKeyReused(
            f"the idempotency key {idempotency_key!r} already started run {run.id} for a different request"
            " (another thread, agent, input, messages or tools); use a new key"
        )
    return run
