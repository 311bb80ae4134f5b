"""Cancelling a run, wherever it is."""

import asyncio

from application.caller import Caller
from application.errors import RunNotFound
from application.ports.execution import RunEventBus, RunExecutor, RunSubscription
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock
from application.runs.events import store_ending
from domain.errors import IllegalTransition
from domain.ids import RunId
from domain.run_events import RunEvent
from domain.runs import Run, RunStatus

STOP_WAIT_SECONDS = 10.0
"""How long cancelling waits for a run that executes elsewhere (on a worker) to record its end."""


class CancelRun:
    """Cancels a run: one that is queued or waits is cancelled at once; one that executes stops its model or
    tool call promptly, here or on the worker that holds it, and is answered once it has ended. One that does
    not end within `stop_wait_seconds` is answered as it is, its cancel requested: it stops at its next step."""

    def __init__(
        self,
        uow: UnitOfWork,
        clock: Clock,
        bus: RunEventBus,
        executor: RunExecutor,
        stop_wait_seconds: float = STOP_WAIT_SECONDS,
    ) -> None:
        self._uow, self._clock, self._bus, self._executor = uow, clock, bus, executor
        self._stop_wait = stop_wait_seconds

    async def execute(self, caller: Caller, run_id: RunId) -> Run:
        ended: RunEvent | None = None
        async with self._bus.subscribe(run_id) as events:  # before asking: the run's end cannot slip by
            async with self._uow as uow:
                run = await uow.runs.get(caller.org_id, run_id, for_update=True)
                if run is None:
                    raise RunNotFound(f"run {run_id} not found")
                if run.status.is_terminal:
                    raise IllegalTransition(f"the run is already {run.status.value}")
                now = self._clock.now()
                waits = run.status is RunStatus.REQUIRES_ACTION and not run.asks_live  # else a call is open
                if run.status is RunStatus.QUEUED or waits:
                    run.cancel(now)
                    ended = await store_ending(uow, run, self._bus, self._clock)
                else:
                    run.request_cancel(now)
                    await uow.runs.request_cancel(caller.org_id, run_id)
                    await uow.runs.save(run)
                await uow.commit()
            if ended is not None:
                await self._bus.publish(ended)
            if await self._executor.cancel(run_id) or (ended is None and await self._ends(events)):
                async with self._uow.read_only() as uow:
                    return await uow.runs.get(caller.org_id, run_id) or run
        return run

    async def _ends(self, events: RunSubscription) -> bool:
        """Whether a run that executes elsewhere records its end within the wait."""
        try:
            async with asyncio.timeout(self._stop_wait):
                while not (await events.next()).type.ends_stream:
                    pass
        except TimeoutError:
            return False
        return True
