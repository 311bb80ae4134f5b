"""Recovering runs at start-up."""

from application.ports.execution import RunEventBus, RunExecutor
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock
from application.runs.events import RunEventStream
from application.runs.start import run_summary
from domain.runs import RunErrorCode, RunEventType, RunStatus


class RecoverRuns:
    """At start: runs left in progress by a process that stopped are failed as interrupted; queued
    runs are handed to the executor again."""

    def __init__(self, uow: UnitOfWork, clock: Clock, bus: RunEventBus, executor: RunExecutor) -> None:
        self._uow, self._clock, self._bus, self._executor = uow, clock, bus, executor

    async def execute(self, batch: int = 500) -> tuple[int, int]:
        async with self._uow.read_only() as uow:
            unfinished = await uow.runs.unfinished(batch)
        interrupted = resubmitted = 0
        for run in unfinished:
            if run.status is RunStatus.QUEUED:
                await self._executor.submit(run.org_id, run.id)
                resubmitted += 1
                continue
            async with self._uow as uow:
                current = await uow.runs.get(run.org_id, run.id, for_update=True)
                if current is None or current.status is not RunStatus.IN_PROGRESS:
                    continue
                current.fail(
                    RunErrorCode.INTERRUPTED,
                    "the server stopped while the run was executing",
                    self._clock.now(),
                )
                events = await RunEventStream.resume(uow, run.org_id, run.id, self._bus, self._clock)
                event = await events.record(
                    uow,
                    RunEventType.FAILED,
                    {
                        **run_summary(current),
                        "error": {
                            "code": RunErrorCode.INTERRUPTED.value,
                            "message": current.error.message if current.error else "",
                        },
                    },
                )
                await uow.runs.save(current)
                await uow.commit()
            await self._bus.publish(event)
            interrupted += 1
        return interrupted, resubmitted
