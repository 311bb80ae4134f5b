"""Runs executed as tasks of the API process, with a bound on how many run at once."""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from application.errors import StorageUnavailable
from application.ports.execution import INTERRUPTED
from domain.ids import OrgId, RunId
from infrastructure.logging import current_run

logger = logging.getLogger(__name__)

Execute = Callable[[OrgId, RunId], Awaitable[object]]


class InProcessRunExecutor:
    def __init__(self, execute: Execute, *, concurrency: int = 256) -> None:
        self._execute = execute
        self._gate = asyncio.Semaphore(concurrency)
        self._tasks: dict[RunId, asyncio.Task[None]] = {}
        self._closing = False

    async def submit(self, org_id: OrgId, run_id: RunId) -> None:
        # No await before the task exists: a follower that subscribes right after submit sees every event.
        if self._closing:
            raise RuntimeError("the executor is shutting down")
        task = asyncio.create_task(self._run(org_id, run_id), name=f"run-{run_id}")
        self._tasks[run_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(run_id, None) if self._tasks.get(run_id) is task else None)

    async def _run(self, org_id: OrgId, run_id: RunId) -> None:
        current_run.set(str(run_id))  # this task's log lines name the run
        async with self._gate:
            try:
                await self._execute(org_id, run_id)
            except asyncio.CancelledError:
                raise
            except StorageUnavailable:
                # The run stays as stored (queued, or in progress) for recovery; the outage is logged where it happened.
                logger.warning("a run could not execute: the database is unavailable", extra={"run_id": str(run_id)})
            except Exception:
                logger.exception("run execution crashed", extra={"run_id": str(run_id)})

    async def cancel(self, run_id: RunId) -> bool:
        task = self._tasks.get(run_id)
        if task is None or task.done():
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({task}, timeout=10)
        return True

    @property
    def running(self) -> int:
        return len(self._tasks)

    async def shutdown(self, grace_seconds: float = 10.0) -> list[RunId]:
        """Stop taking runs, give running ones a grace period, then cancel the rest (each records
        itself cancelled). Returns the runs that had to be interrupted."""
        self._closing = True
        tasks = dict(self._tasks)
        if not tasks:
            return []
        _done, pending = await asyncio.wait(tasks.values(), timeout=grace_seconds)
        interrupted = [run_id for run_id, task in tasks.items() if task in pending]
        for task in pending:
            task.cancel(INTERRUPTED)
        if pending:
            await asyncio.wait(pending, timeout=10)
        return interrupted
