"""Cancelling a run, wherever it is."""

from application.caller import Caller
from application.errors import RunNotFound
from application.ports.execution import RunEventBus, RunExecutor
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock
from application.runs.events import store_ending
from domain.errors import IllegalTransition
from domain.ids import RunId
from domain.run_events import RunEvent
from domain.runs import Run, RunStatus


class CancelRun:
    """Cancels a run: one that is queued or waits is cancelled at once; one that executes stops its model or
    tool call promptly (here, or on the worker that runs it, at its next step)."""

    def __init__(self, uow: UnitOfWork, clock: Clock, bus: RunEventBus, executor: RunExecutor) -> None:
        self._uow, self._clock, self._bus, self._executor = uow, clock, bus, executor

    async def execute(self, caller: Caller, run_id: RunId) -> Run:
        ended: RunEvent | None = None
        async with self._uow as uow:
            run = await uow.runs.get(caller.org_id, run_id, for_update=True)
            if run is None:
                raise RunNotFound(f"run {run_id} not found")
            if run.status.is_terminal:
                raise IllegalTransition(f"the run is already {run.status.value}")
            now = self._clock.now()
            if run.status in (RunStatus.QUEUED, RunStatus.REQUIRES_ACTION):
                run.cancel(now)
                ended = await store_ending(uow, run, self._bus, self._clock)
            else:
                run.request_cancel(now)
                await uow.runs.request_cancel(caller.org_id, run_id)
                await uow.runs.save(run)
            await uow.commit()
        if ended is not None:
            await self._bus.publish(ended)
        if await self._executor.cancel(run_id):
            async with self._uow.read_only() as uow:
                return await uow.runs.get(caller.org_id, run_id) or run
        return run
