"""Recovering runs at start-up (the in-process executor), and as workers go (worker mode)."""

from collections.abc import Awaitable, Callable
from datetime import datetime

from application.ports.execution import RunEventBus, RunExecutor
from application.ports.persistence import ClaimedRun, UnitOfWork
from application.ports.system import Clock
from application.runs.events import end_claimed
from application.runs.recorder import SUB_AGENT_LOST
from domain.ids import OrgId, RunId
from domain.run_events import RunEvent
from domain.runs import INTERRUPTED_MESSAGE, Run, RunErrorCode, RunStatus

RECOVERY_BATCH = 500


class RecoverRuns:
    """At start: runs left in progress by a process that stopped are failed as interrupted (so are runs that
    waited for the answer to a question its open call asked: the call is gone, and sub-agents' runs, even queued:
    the run that delegated to them is gone), or end cancelled when their cancel was requested; other queued runs
    are handed to the executor again. Runs that another live process holds are left alone.

    Where runs execute from a job queue (worker mode), a run's job is how it is taken on after a lost process. The
    runs that have none executed in a caller's task (a published agent called over MCP, in the API process serving
    the call; a sub-agent's run, in the task of the run that delegated to it): when their process stops, no one
    waits for their answers any more. Workers look for them now and then (`end_stranded`)."""

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
                if run.status is RunStatus.QUEUED and run.parent_run_id is None:
                    await self._executor.submit(run.org_id, run.id)
                    resubmitted += 1
                elif await self._interrupt(run.org_id, run.id) is not None:
                    interrupted += 1
            if len(unfinished) < batch:
                return interrupted, resubmitted
            last = unfinished[-1].id

    async def end_stranded(self, silent_seconds: float, batch: int = RECOVERY_BATCH) -> int:
        """Worker mode: the runs with no job whose process has been silent for `silent_seconds` end, queued or in
        progress (cancelled, when that was asked): failed as interrupted, or, a sub-agent's, as worker_lost, as
        whoever takes on the run that delegated to it ends it (RunRecorder.begin); how many."""
        ended = 0
        last: RunId | None = None
        while True:
            async with self._uow.read_only() as uow:
                stranded = await uow.runs.stranded(silent_seconds, batch, after=last)
            for run in stranded:
                if await self._end_stranded(run, silent_seconds) is not None:
                    ended += 1
            if len(stranded) < batch:
                return ended
            last = stranded[-1].id

    async def _end_stranded(self, run: Run, silent_seconds: float) -> RunEvent | None:
        def why(claimed: Run) -> tuple[str, str]:
            if claimed.parent_run_id is not None:  # as the takeover of the run that delegated to it ends it
                return RunErrorCode.WORKER_LOST, SUB_AGENT_LOST
            return RunErrorCode.INTERRUPTED, INTERRUPTED_MESSAGE

        # Claimed only if stranded still: taken, or heard from, since it was read, it is left alone.
        return await self._end_lost(lambda uow: uow.runs.claim_stranded(run, silent_seconds), why)

    async def _interrupt(self, org_id: OrgId, run_id: RunId) -> RunEvent | None:
        def why(claimed: Run) -> tuple[str, str] | None:
            # A sub-agent's run, even queued: only the run that delegated to it, in the process that stopped, waited
            # for its answer.
            if not (claimed.status is RunStatus.IN_PROGRESS or claimed.asks_live or claimed.parent_run_id):
                return None
            return RunErrorCode.INTERRUPTED, INTERRUPTED_MESSAGE

        return await self._end_lost(lambda uow: uow.runs.claim(org_id, run_id), why)

    async def _end_lost(
        self,
        claim: Callable[[UnitOfWork], Awaitable[ClaimedRun | None]],
        why: Callable[[Run], tuple[str, str] | None],
    ) -> RunEvent | None:
        """The run claimed and ended as its lost process left it (Run.end_after_its_process), with the error code and
        message `why` gives, its event published; None when it is not claimed, or `why` gives none."""

        def ending(run: Run, now: datetime) -> bool:
            reason = why(run)
            if reason is not None:
                run.end_after_its_process(*reason, now)
            return reason is not None

        _, event = await end_claimed(self._uow, claim, ending, self._bus, self._clock)
        return event
