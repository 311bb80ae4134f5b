"""A run whose executor could not reach the database as it took the run (its connection pool exhausted by a burst,
or the database down) is not stranded: it stays queued, and is tried again shortly, by a worker (its job goes
back to the queue) or by the in-process executor."""

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

import pytest
from procrastinate.job_context import AbortReason
from procrastinate.jobs import Job
from sqlalchemy.exc import TimeoutError as PoolTimeout

from application.errors import StorageUnavailable
from application.ports.execution import INTERRUPTED
from domain.ids import OrgId, RunId
from domain.runs import RunStatus
from infrastructure.container import Container
from infrastructure.execution import job_queue, run_queue
from infrastructure.execution.in_process import InProcessRunExecutor
from infrastructure.limits.admission import Admission, RunAdmission
from infrastructure.settings import Settings
from tests.conftest import as_port
from tests.integration.test_run_leases import queued_run


class _NoConnection(RunAdmission):
    """The admission, its database's pool exhausted: every connection it asks for times out."""

    async def _admit(self, org_id: OrgId, run_id: RunId) -> Admission:
        raise PoolTimeout("QueuePool limit of size 12 overflow 12 reached, connection timed out, timeout 30.00")


def _job(attempts: int = 0) -> Job:
    return Job(
        id=1, queue=run_queue.QUEUE, lock="run", queueing_lock="run", task_name=run_queue.TASK, attempts=attempts
    )


async def _never(org_id: OrgId, run_id: RunId, *, hand_back_on_outage: bool = False) -> None:
    raise AssertionError("a run without a slot does not execute")


async def test_a_run_whose_worker_finds_no_database_connection_stays_queued_and_its_job_is_tried_again(
    container: Container, settings: Settings
) -> None:
    _thread, run = await queued_run(container)
    app = job_queue.job_queue(settings.database_url, 2)  # its task as `threadline worker` runs it (not opened)
    runs = job_queue.WorkerRuns(_never, admission=_NoConnection(container.database(), default_limit=10))
    context: Any = SimpleNamespace(job=_job())

    with pytest.raises(job_queue.NotStarted) as raised:
        await runs.execute(context, run.org_id, run.id)

    job = Job(id=1, queue=run_queue.QUEUE, lock=str(run.id), queueing_lock=str(run.id), task_name=run_queue.TASK)
    retry = app.tasks[run_queue.TASK].get_retry_exception(exception=raised.value, job=job)
    assert retry is not None, "the job ends, and its run would stay queued for ever"
    retry_at = retry.retry_decision.retry_at
    assert retry_at is not None
    assert timedelta(seconds=3) < retry_at - datetime.now(UTC) <= timedelta(seconds=job_queue.NOT_STARTED_RETRY_SECONDS)
    async with as_port(container.uow()).read_only() as uow:
        stored = await uow.runs.get(run.org_id, run.id)
    assert stored is not None and stored.status is RunStatus.QUEUED


async def test_a_job_handed_back_is_taken_again_at_once_and_a_failing_one_ends(settings: Settings) -> None:
    app = job_queue.job_queue(settings.database_url, 2)
    job = Job(id=1, queue=run_queue.QUEUE, lock="run", queueing_lock="run", task_name=run_queue.TASK)
    task = app.tasks[run_queue.TASK]
    handed_back = task.get_retry_exception(exception=job_queue.HandedBack("run"), job=job)
    assert handed_back is not None and handed_back.retry_decision.retry_at is not None
    assert handed_back.retry_decision.retry_at <= datetime.now(UTC)
    assert task.get_retry_exception(exception=RuntimeError("a bug"), job=job) is None


async def test_the_in_process_executor_starts_again_a_run_that_could_not_start() -> None:
    tries: list[RunId] = []
    started = asyncio.Event()

    async def execute(org_id: OrgId, run_id: RunId, *, began: object = None) -> None:
        tries.append(run_id)
        if len(tries) == 1:
            raise StorageUnavailable("the database is unavailable; try again shortly")
        started.set()

    executor = InProcessRunExecutor(execute, retry_seconds=0.01)
    run_id = RunId(uuid.uuid4())
    await executor.submit(OrgId(uuid.uuid4()), run_id)
    async with asyncio.timeout(10):
        await started.wait()
    assert tries == [run_id, run_id]
    assert await executor.shutdown() == []


async def test_a_run_that_cannot_be_stored_mid_way_pauses_and_its_job_is_tried_again_until_the_outage_lasts() -> None:
    """A worker hands such a run back (it goes on from its last stored step when its job is taken again), unless
    its job was tried OUTAGE_TRIES times: then the run fails with storage_unavailable, as the in-process one does."""
    asked: list[bool] = []

    async def execute(org_id: OrgId, run_id: RunId, *, hand_back_on_outage: bool = False) -> None:
        asked.append(hand_back_on_outage)
        raise StorageUnavailable("the database is unavailable; try again shortly")

    runs = job_queue.WorkerRuns(execute)
    for attempts in (0, job_queue.OUTAGE_TRIES - 2, job_queue.OUTAGE_TRIES - 1):
        job = Job(id=1, queue=run_queue.QUEUE, lock="run", queueing_lock="run", task_name=run_queue.TASK)
        context: Any = SimpleNamespace(job=job.evolve(attempts=attempts))
        with pytest.raises(job_queue.NotStarted):
            await runs.execute(context, OrgId(uuid.uuid4()), RunId(uuid.uuid4()))
    assert asked == [True, True, False]


async def test_a_run_started_as_the_executor_shuts_down_is_waited_for_then_interrupted() -> None:
    # Its slot was taken before the shutdown began, and its run created meanwhile: the shutdown waits for it as
    # for the others, and interrupts it past the grace period (else it would go on, or end as if cancelled).
    seen: list[object] = []

    async def execute(org_id: OrgId, run_id: RunId, *, began: object = None) -> None:
        seen.append(began)
        try:
            await asyncio.Event().wait()  # a run longer than the grace period
        except asyncio.CancelledError as cancelled:
            seen.append(cancelled.args)
            raise

    executor = InProcessRunExecutor(execute)
    slot = await executor.reserve(OrgId(uuid.uuid4()))
    assert slot is not None
    stopping = asyncio.create_task(executor.shutdown(grace_seconds=0.2))
    for _ in range(5):
        await asyncio.sleep(0)  # the shutdown began
    assert not stopping.done() and await executor.reserve(OrgId(uuid.uuid4())) is None
    run_id = RunId(uuid.uuid4())
    slot.start(run_id, "began")
    async with asyncio.timeout(10):
        assert await stopping == [run_id]
    assert seen == ["began", (INTERRUPTED,)]


async def test_a_run_cancelled_while_it_waits_for_a_slot_records_its_end_at_once_and_one_stopped_so_does_not() -> None:
    """A run that went on after its client's tool results waits for its organization's slot in progress: its
    user's cancel (stored first) has it executed at once, without a slot, to record its end (it would otherwise stay
    in progress, its thread busy, until the next start). A process that stops leaves a waiting run as stored."""
    runs = _OneSlot()
    executor = await runs.taken()
    waiting, later = RunId(uuid.uuid4()), RunId(uuid.uuid4())
    await executor.submit(runs.org_id, waiting)
    await executor.submit(runs.org_id, later)
    for _ in range(5):
        await asyncio.sleep(0)  # both tasks begin
    assert len(executor._orgs[runs.org_id].waiting) == 2  # and wait in line for the slot
    async with asyncio.timeout(10):
        assert await executor.cancel(waiting)
    assert runs.executed == [runs.holding, waiting]  # its end recorded while the slot is still taken
    async with asyncio.timeout(10):
        stopped = await executor.shutdown(grace_seconds=0)
    assert stopped == [runs.holding, later]
    assert runs.executed == [runs.holding, waiting]  # the run still waiting when the process stopped was left as stored


async def _one_slot(_org_id: OrgId) -> int:
    return 1


class _OneSlot:
    """The executions of an organization with one slot, taken by `holding`, which stays at the model."""

    def __init__(self) -> None:
        self.org_id, self.holding = OrgId(uuid.uuid4()), RunId(uuid.uuid4())
        self.executed: list[RunId] = []
        self._held = asyncio.Event()

    async def __call__(self, org_id: OrgId, run_id: RunId, *, began: object = None) -> None:
        self.executed.append(run_id)
        if run_id == self.holding:
            self._held.set()
            await asyncio.Event().wait()  # at the model, as long as it takes

    async def taken(self) -> InProcessRunExecutor:
        """An executor whose one slot `holding` has taken."""
        executor = InProcessRunExecutor(self, org_limit=_one_slot)
        await executor.submit(self.org_id, self.holding)
        await self._held.wait()
        return executor


async def test_a_second_cancel_while_the_first_is_recorded_waits_for_it_and_does_not_start_it_again() -> None:
    org_id, holding, waiting = OrgId(uuid.uuid4()), RunId(uuid.uuid4()), RunId(uuid.uuid4())
    executed: list[RunId] = []
    held, recording, recorded = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def execute(org_id: OrgId, run_id: RunId, *, began: object = None) -> None:
        executed.append(run_id)
        if run_id == holding:
            held.set()
            await asyncio.Event().wait()  # at the model, as long as it takes
        recording.set()
        await recorded.wait()  # its end being stored

    executor = InProcessRunExecutor(execute, org_limit=_one_slot)
    await executor.submit(org_id, holding)
    await held.wait()
    await executor.submit(org_id, waiting)
    first = asyncio.create_task(executor.cancel(waiting))
    async with asyncio.timeout(10):
        await recording.wait()
    second = asyncio.create_task(executor.cancel(waiting))
    for _ in range(5):
        await asyncio.sleep(0)  # the second cancel reached the recording run
    assert not first.done() and not second.done()  # both answer once the end is recorded
    recorded.set()
    async with asyncio.timeout(10):
        assert await first and await second
    assert executed == [holding, waiting]  # recorded once, not stopped half-way and begun again
    await executor.shutdown(grace_seconds=0)


async def test_two_cancels_of_a_waiting_run_made_at_once_record_its_end_once() -> None:
    runs = _OneSlot()
    executor = await runs.taken()
    waiting = RunId(uuid.uuid4())
    await executor.submit(runs.org_id, waiting)
    async with asyncio.timeout(10):
        assert list(await asyncio.gather(executor.cancel(waiting), executor.cancel(waiting))) == [True, True]
    assert runs.executed == [runs.holding, waiting]
    await executor.shutdown(grace_seconds=0)


async def test_a_cancel_whose_recording_or_start_met_an_outage_is_recorded_again_without_waiting_for_a_slot() -> None:
    """A run whose cancel could not be recorded (the database did not answer) is tried again without a slot; one
    waiting to be tried again after such an outage is executed at the cancel, without waiting for the retry."""
    org_id = OrgId(uuid.uuid4())
    holding, waiting, failed = RunId(uuid.uuid4()), RunId(uuid.uuid4()), RunId(uuid.uuid4())
    executed: list[RunId] = []
    held, again = asyncio.Event(), asyncio.Event()

    async def execute(org_id: OrgId, run_id: RunId, *, began: object = None) -> None:
        executed.append(run_id)
        if run_id == holding:
            held.set()
            await asyncio.Event().wait()  # at the model, as long as it takes
        if executed.count(run_id) == 1:
            raise StorageUnavailable("the database is unavailable; try again shortly")
        if run_id == waiting:
            again.set()

    short = InProcessRunExecutor(execute, org_limit=_one_slot, retry_seconds=0)
    await short.submit(org_id, holding)
    await held.wait()
    await short.submit(org_id, waiting)
    assert await short.cancel(waiting)  # its recording met the outage
    async with asyncio.timeout(10):
        await again.wait()  # tried again while the slot is still taken
    assert executed == [holding, waiting, waiting]
    await short.shutdown(grace_seconds=0)

    executed.clear()
    late = InProcessRunExecutor(execute, org_limit=_one_slot, retry_seconds=3600)
    await late.submit(org_id, failed)  # could not start: tried again in an hour
    for _ in range(5):
        await asyncio.sleep(0)
    assert executed == [failed]
    held.clear()
    await late.submit(org_id, holding)
    await held.wait()
    async with asyncio.timeout(10):
        assert await late.cancel(failed)  # executed now, without the slot
    assert executed == [failed, holding, failed]
    await late.shutdown(grace_seconds=0)


class _SlowAdmission:
    """An admission that answers (admitted) only when the test lets it."""

    def __init__(self) -> None:
        self.asked, self.answer = asyncio.Event(), asyncio.Event()
        self.released: list[RunId] = []

    async def admit(self, org_id: OrgId, run_id: RunId) -> Admission:
        self.asked.set()
        await self.answer.wait()
        return Admission(admitted=True, request_id="req")

    async def release(self, run_id: RunId) -> None:
        self.released.append(run_id)


@pytest.mark.parametrize(
    ("reason", "aborts"),
    [(AbortReason.USER_REQUEST, 1), (AbortReason.SHUTDOWN, 1), (AbortReason.SHUTDOWN, 2)],
    ids=["users-cancel", "worker-stops", "users-cancel-then-worker-stops"],
)
async def test_a_job_aborted_while_its_run_is_admitted_carries_the_admission_through(
    reason: AbortReason, aborts: int
) -> None:
    """Stopped half-way, the admission could leave the run with a slot taken and nothing executing it. A user's
    cancel (stored before the abort) then executes the run, which records its end; a worker that stops hands it
    back (its job taken again at once, its slot kept). A job whose abort a user requested as well goes back the
    same way (see test_worker_mode_gaps.py: procrastinate fails it, and the run gets a job of its own)."""
    executed: list[RunId] = []

    async def execute(org_id: OrgId, run_id: RunId, *, hand_back_on_outage: bool = False) -> None:
        executed.append(run_id)

    admission = _SlowAdmission()
    runs = job_queue.WorkerRuns(execute, admission=cast(RunAdmission, admission))
    context: Any = SimpleNamespace(job=_job(), abort_reason=lambda: reason)
    run_id = RunId(uuid.uuid4())
    taking = asyncio.create_task(runs.execute(context, OrgId(uuid.uuid4()), run_id))
    async with asyncio.timeout(10):
        await admission.asked.wait()
    for _ in range(aborts):
        taking.cancel()  # the job aborted (procrastinate cancels its task; a stopping worker aborts it again)
        for _ in range(5):
            await asyncio.sleep(0)
    admission.answer.set()
    async with asyncio.timeout(10):
        if reason is AbortReason.SHUTDOWN:
            with pytest.raises(job_queue.HandedBack):  # procrastinate queues the job again at once (or the run's own)
                await taking
        else:
            await taking
    assert (executed, admission.released) == (([run_id], [run_id]) if reason is AbortReason.USER_REQUEST else ([], []))
