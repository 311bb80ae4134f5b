"""Runs executed as tasks of the API process, with a bound on how many run at once, and on how many of one
organization's do (fair share: the rest wait queued, while other organizations' runs start at once)."""

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from application.errors import StorageUnavailable
from application.ports.execution import INTERRUPTED
from domain.ids import OrgId, RunId
from infrastructure.logging import current_run

logger = logging.getLogger(__name__)


class Execute(Protocol):
    def __call__(self, org_id: OrgId, run_id: RunId, *, began: object = None) -> Awaitable[object]: ...


OrgLimit = Callable[[OrgId], Awaitable[int]]


async def _no_org_limit(_org_id: OrgId) -> int:
    return 1 << 30


class _OrgSlots:
    """The runs of one organization executing now; the others wait their turn, first come first served."""

    def __init__(self) -> None:
        self.executing = 0
        self.waiting: deque[tuple[asyncio.Future[None], int]] = deque()

    def take_now(self, limit: int) -> bool:
        """Takes a slot if one is free and no run waits for one."""
        if self.executing < limit and not self.waiting:
            self.executing += 1
            return True
        return False

    async def take(self, limit: int) -> None:
        if self.take_now(limit):
            return
        turn = asyncio.get_running_loop().create_future()
        self.waiting.append((turn, limit))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.give_back()  # handed a slot just as the run was cancelled: the next one takes it
            else:
                with contextlib.suppress(ValueError):  # give_back took it off the line in the same loop step
                    self.waiting.remove((turn, limit))
            raise

    def give_back(self) -> None:
        self.executing -= 1
        while self.waiting and self.executing < self.waiting[0][1]:
            turn, _limit = self.waiting.popleft()
            if not turn.done():
                self.executing += 1
                turn.set_result(None)


NOT_STARTED_RETRY_SECONDS = 5.0
"""How soon a run that could not start (the database did not answer in time) is tried again."""


class InProcessRunExecutor:
    def __init__(
        self,
        execute: Execute,
        *,
        concurrency: int = 256,
        org_limit: OrgLimit = _no_org_limit,
        retry_seconds: float = NOT_STARTED_RETRY_SECONDS,
    ) -> None:
        self._execute, self._org_limit = execute, org_limit
        self._gate = asyncio.Semaphore(concurrency)
        self._orgs: dict[OrgId, _OrgSlots] = {}
        self._runs: dict[RunId, _Running] = {}
        """The runs with a task."""
        self._retries: dict[RunId, _Retry] = {}
        self._executing: set[RunId] = set()
        """The runs whose task holds a slot (the others wait for one)."""
        self._cancels: dict[RunId, asyncio.Task[bool]] = {}
        """The cancels under way, by run: a cancel made meanwhile waits for the one under way."""
        self._retry_seconds = retry_seconds
        self._closing = False
        self._reserved = 0
        self._none_reserved = asyncio.Event()
        self._none_reserved.set()

    async def submit(self, org_id: OrgId, run_id: RunId) -> None:
        # No await before the task exists: a follower that subscribes right after submit sees every event.
        if self._closing:
            raise RuntimeError("the executor is shutting down")
        self._start(org_id, run_id)

    async def reserve(self, org_id: OrgId) -> "_Slot | None":
        """A slot taken now, when the process and the organization have one free and no run waits for one."""
        if self._closing:
            return None
        limit = await self._org_limit(org_id)
        if self._closing or self._gate.locked():
            return None
        slots = self._orgs.setdefault(org_id, _OrgSlots())
        if not slots.take_now(limit):
            self._forget_idle(org_id, slots)
            return None
        await self._gate.acquire()  # free (checked above, nothing awaited since): returns at once
        self._reserved += 1
        self._none_reserved.clear()
        return _Slot(self, org_id)

    def _settled(self) -> None:
        """A reserved slot was used or given back."""
        self._reserved -= 1
        if not self._reserved:
            self._none_reserved.set()

    def _start(
        self, org_id: OrgId, run_id: RunId, slot: "_Slot | None" = None, began: object = None, *, waits: bool = True
    ) -> "asyncio.Task[None]":
        """`waits` False: executed at once, without a slot (a run that only records the end its cancel asked)."""
        run = self._run(org_id, run_id, slot, began) if waits else self._executed(org_id, run_id, None, waits=False)
        task = asyncio.create_task(run, name=f"run-{run_id}")
        running = self._runs[run_id] = _Running(task, org_id, records_cancel=not waits)

        def done(_: object) -> None:
            if self._runs.get(run_id) is running:
                del self._runs[run_id]
                self._executing.discard(run_id)

        task.add_done_callback(done)
        return task

    async def _run(self, org_id: OrgId, run_id: RunId, slot: "_Slot | None" = None, began: object = None) -> None:
        async with slot.held() if slot is not None else self._slot(org_id):
            self._executing.add(run_id)
            await self._executed(org_id, run_id, began)

    async def _executed(self, org_id: OrgId, run_id: RunId, began: object, *, waits: bool = True) -> None:
        current_run.set(str(run_id))  # this task's log lines name the run
        try:
            await self._execute(org_id, run_id, began=began)
        except asyncio.CancelledError:
            raise
        except StorageUnavailable:
            # The run could not start and stays as stored (queued, or in progress): it is tried again shortly.
            logger.warning(
                "a run could not start: the database is unavailable; it is tried again in %g s",
                self._retry_seconds,
                extra={"run_id": str(run_id)},
            )
            self._try_again_later(org_id, run_id, waits=waits)
        except Exception:
            logger.exception("run execution crashed", extra={"run_id": str(run_id)})

    def _try_again_later(self, org_id: OrgId, run_id: RunId, *, waits: bool = True) -> None:
        """`waits` False: a run that only records the end its cancel requested is tried again without a slot."""

        def again() -> None:
            self._retries.pop(run_id, None)
            if not self._closing and run_id not in self._runs:
                self._start(org_id, run_id, waits=waits)

        if not self._closing:
            self._retries[run_id] = _Retry(org_id, asyncio.get_running_loop().call_later(self._retry_seconds, again))

    @contextlib.asynccontextmanager
    async def _slot(self, org_id: OrgId) -> AsyncIterator[None]:
        """One of the organization's slots, then one of the process's; waits (the run stays queued) while they
        are all taken."""
        limit = await self._org_limit(org_id)
        slots = self._orgs.setdefault(org_id, _OrgSlots())
        await slots.take(limit)
        try:
            async with self._gate:
                yield
        finally:
            self._give_back(org_id, slots)

    def _give_back(self, org_id: OrgId, slots: _OrgSlots) -> None:
        slots.give_back()
        self._forget_idle(org_id, slots)

    def _reserved_given_back(self, org_id: OrgId) -> None:
        self._gate.release()
        slots = self._orgs.get(org_id)
        if slots is not None:
            self._give_back(org_id, slots)

    def _forget_idle(self, org_id: OrgId, slots: _OrgSlots) -> None:
        if slots.executing == 0 and not slots.waiting:
            self._orgs.pop(org_id, None)

    async def cancel(self, run_id: RunId) -> bool:
        """Stops the run's task, once its cancel is stored (see CancelRun): a run executing records itself
        cancelled as it stops; one not executing (waiting for a slot, or to be tried again after an outage) is
        executed at once, without a slot, to record it. True when the run's end was recorded here (or is being).
        A cancel made while another of the same run is under way waits for that one: the run is recorded once."""
        cancelling = self._cancels.get(run_id)
        if cancelling is None:
            cancelling = asyncio.create_task(self._cancel(run_id), name=f"cancel-{run_id}")
            self._cancels[run_id] = cancelling
            cancelling.add_done_callback(lambda _: self._cancels.pop(run_id, None))
        return await asyncio.shield(cancelling)  # carried to its end even if its caller goes away

    async def _cancel(self, run_id: RunId) -> bool:
        retry = self._retries.pop(run_id, None)
        if retry is not None:
            retry.handle.cancel()
            if self._closing:
                return False
            await self._recorded(retry.org_id, run_id)
            return True
        running = self._runs.get(run_id)
        if running is None or running.task.done():
            return False
        task = running.task
        if running.records_cancel:  # an earlier cancel's, which stopped waiting: waited for, not restarted
            await asyncio.wait({task}, timeout=10)
            return True
        org_id, waiting = running.org_id, run_id not in self._executing
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({task}, timeout=10)
        if waiting and not self._closing:
            # It waited for a slot (a run going on after its client's tool results or answers waits so, in
            # progress): executed now, without a slot, it records the end its cancel requested, instead of
            # staying in progress until the next start.
            await self._recorded(org_id, run_id)
        return True

    async def _recorded(self, org_id: OrgId, run_id: RunId) -> None:
        """The run executed at once, without a slot, to record the end its stored cancel requested."""
        await asyncio.wait({self._start(org_id, run_id, waits=False)}, timeout=10)

    @property
    def running(self) -> int:
        return len(self._runs)

    async def shutdown(self, grace_seconds: float = 10.0) -> list[RunId]:
        """Stop taking runs, give running ones a grace period, then cancel the rest (each records
        itself cancelled). Returns the runs that had to be interrupted."""
        self._closing = True
        for retry in self._retries.values():
            retry.handle.cancel()  # left queued, as stored, for the next start's recovery
        self._retries.clear()
        deadline = asyncio.get_running_loop().time() + grace_seconds
        with contextlib.suppress(TimeoutError):  # runs being created with a slot taken: they start, or not, first
            async with asyncio.timeout_at(deadline):
                await self._none_reserved.wait()
        tasks = {run_id: running.task for run_id, running in self._runs.items()}
        if not tasks:
            return []
        _done, pending = await asyncio.wait(
            tasks.values(), timeout=max(0.0, deadline - asyncio.get_running_loop().time())
        )
        interrupted = [run_id for run_id, task in tasks.items() if task in pending]
        for task in pending:
            task.cancel(INTERRUPTED)
        if pending:
            await asyncio.wait(pending, timeout=10)
        return interrupted


@dataclass(frozen=True)
class _Running:
    """A run's task, and its organization."""

    task: "asyncio.Task[None]"
    org_id: OrgId
    records_cancel: bool
    """Executed without a slot, only to record the end its cancel requested."""


@dataclass(frozen=True)
class _Retry:
    """A run to be tried again shortly (it could not start, or record its cancel: the database did not answer)."""

    org_id: OrgId
    handle: asyncio.TimerHandle


class _Slot:
    """An organization's slot and one of the process's, taken for a run about to be created started."""

    def __init__(self, executor: InProcessRunExecutor, org_id: OrgId) -> None:
        self._executor, self._org_id = executor, org_id
        self._used = False

    def start(self, run_id: RunId, began: object) -> None:
        self._used = True
        self._executor._start(self._org_id, run_id, self, began)  # also while it shuts down: it waits for these
        self._executor._settled()

    def release(self) -> None:
        if not self._used:
            self._used = True
            self._give_back()
            self._executor._settled()

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            self._give_back()

    def _give_back(self) -> None:
        self._executor._reserved_given_back(self._org_id)
