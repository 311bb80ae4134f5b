"""Starting a run once per idempotency key, for every way a run is asked for (the runs API, the
OpenAI-compatible routes): the key's run when it exists, else the run queued now, published and handed to the
executor. A request that loses the race for a key answers with the winner's run and queues nothing."""

from collections.abc import Awaitable, Callable

from application.errors import IdempotencyConflict, IdempotencyKeyReused
from application.ports.execution import RunEventBus, RunExecutor
from application.ports.limits import NoRunRateLimit, RunRateLimit
from application.ports.persistence import UnitOfWork
from domain.ids import OrgId, ThreadId
from domain.run_events import RunEvent
from domain.runs import Run

Queue = Callable[[], Awaitable["tuple[Run, RunEvent] | Run"]]
"""Queues the run in one transaction; answers the key's run instead when it appeared meanwhile."""


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
        try:
            queued = await queue()
        except IdempotencyConflict:
            winner = await self._by_key(org_id, idempotency_key)
            if winner is None:
                raise
            return _replayed(winner, idempotency_key, digest, thread_id), False
        if isinstance(queued, Run):  # the key's run, created while this request waited for the thread
            return _replayed(queued, idempotency_key, digest, thread_id), False
        run, created = queued
        await self._bus.publish(created)
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
