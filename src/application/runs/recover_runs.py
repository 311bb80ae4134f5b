"""Recovering runs at start-up."""

from application.ports.execution import RunEventBus, RunExecutor
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock
from application.runs.events import store_lost_end
from domain.ids import OrgId, RunId
from domain.run_events import RunEvent
from domain.runs import INTERRUPTED_MESSAGE, RunErrorCode, RunStatus

RECOVERY_BATCH = 500


class RecoverRuns:
    """At start: runs left in progress by a process that stopped are failed as interrupted (so are runs that
    waited for the answer to a question its open call asked: the call is gone), or end cancelled when their cancel
    was requested; queued runs are handed to the executor again. Runs that another live process holds are left
    alone."""

    def __init__(self, uow: UnitOfWork, clock: Clock, bus: RunEventBus, executor: RunExecutor) -> None:
        self._uow, self._clock, self._bus, self._executor = uow, clock, bus, executor

    async def execute(self, batch: int = RECOVERY_BATCH) -> tuple[int, int]:
        """How many runs were ended (failed as interrupted, or cancelled), and how many were resubmitted: all of
        them, a batch at a time."""
        interrupted = resubmitted = 0
        last: RunId | None = None
        while True:
            async with self._uow.read_only() as uow:
                unfinished = await uow.runs.unfinished(batch, after=last)
            for run in unfinished:
                if run.status is RunStatus.QUEUED:
                    await self._executor.submit(run.org_id, run.id)
                    resubmitted += 1
                elif (event := await self._interrupt(run.org_id, run.id)) is not None:
                    await self._bus.publish(event)
                    interrupted += 1
            if len(unfinished) < batch:
                return interrupted, resubmitted
            last = unfinished[-1].id

    async def _interrupt(self, org_id: OrgId, run_id: RunId) -> RunEvent | None:
        async with self._uow as uow:
            claimed = await uow.runs.claim(org_id, run_id)  # whoever held it can no longer write it
            if claimed is None or not (claimed.run.status is RunStatus.IN_PROGRESS or claimed.run.asks_live):
                return None
            interrupted = RunErrorCode.INTERRUPTED
            event = await store_lost_end(uow, claimed, interrupted, INTERRUPTED_MESSAGE, self._bus, self._clock)
            await uow.commit()
        return event
