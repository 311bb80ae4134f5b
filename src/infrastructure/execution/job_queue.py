"""Runs executed by `threadline worker` processes, taken from a procrastinate job queue on PostgreSQL.

An API process in worker mode queues a job per run (and never executes runs): in the transaction that stores the
run queued (persistence/repositories/run_jobs.py), or through `submit` for a run handed over again; any worker takes
it. A run's job has the run as its lock, so two workers never execute one run at once; a thread has at most one
active run (run creation locks the thread), so a thread's runs execute in order. Cancelling a run aborts its job:
the worker that holds it cancels the run's task at once; a job waiting for a slot is made due, and its run, admitted
without one, records its end. A worker executes a run only once its organization
has a free slot (see limits/admission.py); until then its job goes back to the queue, due later, and is made due
the moment a slot is given back, so a waiting run never holds a worker's slot.

A job that succeeded is deleted as it ends (its run's row says how the run went); one that failed or was aborted
is kept FINISHED_JOBS_KEPT_HOURS for an operator to look at, then deleted by a periodic task, so the queue's tables
hold what is queued, running or recent, not every run ever executed.
"""

import asyncio
import contextlib
import datetime
import functools
import itertools
import logging
import os
import select
import socket
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, Protocol, cast
from uuid import UUID

import procrastinate
import psycopg
import psycopg_pool
from procrastinate import sql as procrastinate_sql
from procrastinate.exceptions import AlreadyEnqueued, ConnectorException
from procrastinate.job_context import AbortReason, JobContext
from procrastinate.jobs import DeleteJobCondition, Job, Status
from procrastinate.manager import JobManager

from application.errors import StorageUnavailable
from application.ports.execution import HANDED_BACK
from application.request_context import current_request_id
from domain.ids import OrgId, RunId
from infrastructure.execution.pg_listener import libpq_dsn
from infrastructure.execution.run_queue import QUEUE, TASK, made_due, run_job_args, run_job_locks
from infrastructure.limits.admission import Admission, RunAdmission, executing
from infrastructure.logging import current_run
from infrastructure.persistence.run_holders import SILENCE_OF_THE_STRANDED, heard_steadily_for

logger = logging.getLogger(__name__)

RECOVER = "take_over_lost_runs"
CLEAN_UP = "remove_finished_jobs"
RUNS = "threadline_runs"
"""The key of the worker's run executor in the jobs' context."""
LOST_SECONDS = "threadline_lost_seconds"
"""The key, in the jobs' context, of how long a worker may be silent before its runs are taken over."""
STRANDED = "threadline_stranded"
"""The key, in the jobs' context, of what ends the runs with no job whose process has been silent for the seconds it
is given (they executed in a caller's task: see RecoverRuns.end_stranded); it answers how many it ended."""


class Execute(Protocol):
    def __call__(
        self, org_id: OrgId, run_id: RunId, *, hand_back_on_outage: bool = False
    ) -> Coroutine[object, None, object]: ...


ADMISSION_RETRY_SECONDS = 30
"""How soon a run whose organization has no free slot is looked at again, if no slot given back woke it first."""
NOT_STARTED_RETRY_SECONDS = 5
"""How soon a run that could not start or go on (the database did not answer in time) is tried again."""
OUTAGE_TRIES = 60
"""How many times a run's job is taken before a run that cannot be stored fails (storage_unavailable) instead of
pausing to go on later: about five minutes of outage, at NOT_STARTED_RETRY_SECONDS."""
MAX_TRIES = 1_000
POLL_SECONDS = 1.0
"""How often a worker looks for jobs whose time came (runs that waited for a slot); new jobs arrive at once."""
FINISHED_JOBS_KEPT_HOURS = 7 * 24
"""How long a job that ended without succeeding is kept (a succeeded one is deleted as it ends)."""
CLEAN_UP_CRON = "17 * * * *"
"""When the jobs kept long enough are deleted: hourly (one worker does it; periodic jobs are deferred once)."""


def job_queue(database_url: str, pool_size: int, lost_seconds: float = 15) -> procrastinate.App:
    """The job queue, on a connection pool of its own (procrastinate speaks psycopg) of up to `pool_size`.
    Workers look for runs of lost workers every third of `lost_seconds`.

    The pool's connections are in autocommit: each of the queue's queries is one statement (a function of
    procrastinate's schema, or one of ours), atomic by itself, and would otherwise be wrapped in a BEGIN and a
    COMMIT of its own: two round trips more for each job taken, finished or queued."""
    connector = procrastinate.PsycopgConnector(
        conninfo=libpq_dsn(database_url),
        min_size=1,
        max_size=pool_size,
        configure=_autocommit,
        pool_factory=_pool,
    )
    app = procrastinate.App(connector=connector)
    app.job_manager = _RunJobs(connector)
    app.task(name=TASK, queue=QUEUE, pass_context=True, retry=_RunRetries())(_execute_run_job)
    every = max(1, int(lost_seconds // 3))
    take_over = app.task(name=RECOVER, queue=QUEUE, pass_context=True, queueing_lock=RECOVER)(_take_over_lost_runs)
    app.periodic(cron=f"* * * * * */{every}", periodic_id=RECOVER)(take_over)
    clean_up = app.task(name=CLEAN_UP, queue=QUEUE, pass_context=True, queueing_lock=CLEAN_UP)(_remove_finished_jobs)
    app.periodic(cron=CLEAN_UP_CRON, periodic_id=CLEAN_UP)(clean_up)
    return app


@contextlib.asynccontextmanager
async def opened(database_url: str, pool_size: int, lost_seconds: float) -> AsyncIterator[procrastinate.App]:
    async with job_queue(database_url, pool_size, lost_seconds).open_async() as app:
        yield app


CHECK_AFTER_IDLE_SECONDS = 5.0
"""A connection of the job queue's pool not taken for this long is checked with a round trip as it is taken: a peer
gone without a word (a failover, a flow dropped by the network) leaves no sign on an idle socket. A busy worker
takes each of its connections again well within it."""
_TAKEN: "weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], float]" = weakref.WeakKeyDictionary()
"""When each connection of the pool was last taken (time.monotonic)."""


def _pool(**arguments: Any) -> psycopg_pool.AsyncConnectionPool[Any]:
    """procrastinate's pool, with its connections checked as they are taken only when in doubt (`_checked`) instead
    of with a round trip each time (procrastinate's choice: two more for each job, as it is taken and finished)."""
    return psycopg_pool.AsyncConnectionPool(**(arguments | {"check": _checked}))


async def _checked(connection: psycopg.AsyncConnection[Any]) -> None:
    """A connection taken from the pool is checked with a round trip (a failed check: the pool takes another) when
    it is new to the pool, idle longer than CHECK_AFTER_IDLE_SECONDS, or written to by its server while it was idle:
    a server that ends a connection (a restart, pg_terminate_backend) says so, or closes it, and either makes its
    socket readable. A connection taken again soon with nothing to read is as its last statement left it."""
    if connection.closed:
        raise psycopg.OperationalError("the connection is closed")
    now = time.monotonic()
    taken, _TAKEN[connection] = _TAKEN.get(connection), now
    if taken is None or now - taken > CHECK_AFTER_IDLE_SECONDS or _written_to(connection):
        await psycopg_pool.AsyncConnectionPool.check_connection(connection)


def _written_to(connection: psycopg.AsyncConnection[Any]) -> bool:
    """Whether the connection's socket has something to read, or was closed (poll: select takes no descriptor
    past 1023)."""
    poller = select.poll()
    poller.register(connection.pgconn.socket, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


async def _autocommit(connection: psycopg.AsyncConnection[Any]) -> None:
    """(As the pool opens a connection; a connection given as `kwargs` would clash with the listening connection's,
    which procrastinate opens with the pool's `kwargs` and autocommit=True.)"""
    await connection.set_autocommit(True)


async def _execute_run_job(context: JobContext, org_id: str, run_id: str) -> None:
    runs: WorkerRuns = context.additional_context[RUNS]
    await runs.execute(context, OrgId(UUID(org_id)), RunId(UUID(run_id)))


_FENCE = "UPDATE runs SET lease = lease + 1 WHERE id = %(run_id)s::uuid AND status IN ('queued', 'in_progress')"
"""A lost worker's run changes hands: its lease is bumped, so what the worker still writes (it may only be
silent, not dead) is refused from now on, before another worker takes the run (and bumps it again)."""


async def _take_over_lost_runs(context: JobContext, timestamp: int) -> None:
    """Runs whose worker stopped sending heartbeats go back to the queue, fenced off from that worker: a live
    worker resumes each from its last stored step (or fails it as worker_lost when its tool calls were in
    flight; see RunRecorder). Then the runs with no job that a process silent for longer executed in a caller's task
    end (run_holders.py), once this worker has been heard from steadily for as long."""
    try:
        await _take_over_stalled_jobs(context)
    except Exception:  # (the runs with no job are looked for all the same; this is tried again at the next turn)
        logger.exception("the runs of lost workers could not all be taken over")
    end_stranded: Callable[[float], Awaitable[int]] | None = context.additional_context.get(STRANDED)
    silent_seconds = SILENCE_OF_THE_STRANDED * context.additional_context[LOST_SECONDS]
    if end_stranded is not None and heard_steadily_for() >= silent_seconds:
        ended = await end_stranded(silent_seconds)
        if ended:
            logger.warning("ended %d runs whose process stopped while it executed them for a caller", ended)


async def _take_over_stalled_jobs(context: JobContext) -> None:
    lost_seconds: float = context.additional_context[LOST_SECONDS]
    app = context.app
    for job in await app.job_manager.get_stalled_jobs(task_name=TASK, seconds_since_heartbeat=lost_seconds):
        org_id, run_id = OrgId(UUID(str(job.task_kwargs["org_id"]))), RunId(UUID(str(job.task_kwargs["run_id"])))
        logger.warning("taking over a run whose worker was lost", extra={"run_id": str(run_id)})
        await app.connector.execute_query_async(_FENCE, run_id=str(run_id))
        # A job of its own for the run, not the lost job queued again: a worker that was only cut off finishes its
        # job when it is back (its run stopped, its writes refused), and would finish (delete) the run's job with it.
        # Queued first: no worker takes it before the lost job has failed (they share the run's lock).
        again = app.configure_task(TASK, **run_job_locks(run_id))
        with contextlib.suppress(AlreadyEnqueued):  # queued by an earlier try that stopped here
            await again.defer_async(**run_job_args(org_id, run_id))
        await app.job_manager.finish_job(job, status=Status.FAILED, delete_job=False)


async def _remove_finished_jobs(context: JobContext, timestamp: int) -> None:
    """The queue's jobs that ended more than FINISHED_JOBS_KEPT_HOURS ago, whatever their end, and their events."""
    await context.app.job_manager.delete_old_jobs(
        nb_hours=FINISHED_JOBS_KEPT_HOURS,
        queue=QUEUE,
        include_failed=True,
        include_cancelled=True,
        include_aborted=True,
    )


_RUNS_JOB = "lock = %(lock)s AND task_name = %(task)s"
DUE_NOW = made_due(_RUNS_JOB)
"""A run's job waiting in the queue until later (for a slot) made due now."""
_ABORT_IF_HELD = (
    "UPDATE procrastinate_jobs SET abort_requested = true"
    f" WHERE {_RUNS_JOB} AND status = 'doing' AND NOT abort_requested"
)
"""A run's job that a worker holds asked to abort (procrastinate's triggers tell the worker), in one statement: a
job read as held and then asked to abort could have gone back to the queue meanwhile, and procrastinate cancels a
job waiting in the queue that is asked to abort (the run would be left with no job)."""
DUE_NOW_IF_CANCELLED = made_due(
    f"{_RUNS_JOB} AND EXISTS (SELECT 1 FROM runs WHERE id = CAST(%(lock)s AS uuid) AND cancel_requested)"
)
"""The same, only if the run's cancel is requested."""

_HEALTH = """
SELECT (SELECT count(*) FROM procrastinate_workers
         WHERE last_heartbeat > now() - make_interval(secs => %(lost)s)) AS workers,
       (SELECT count(*) FROM procrastinate_jobs WHERE task_name = %(task)s AND status = 'todo') AS queued
"""


class QueueRunExecutor:
    """The API side: queues a job for a run handed over again (a new run's job is queued with the run); cancelling
    aborts the run's job wherever it executes."""

    def __init__(self, app: procrastinate.App, lost_seconds: float) -> None:
        self.app, self.lost_seconds = app, lost_seconds

    async def submit(self, org_id: OrgId, run_id: RunId) -> None:
        job = self.app.configure_task(TASK, **run_job_locks(run_id))
        with contextlib.suppress(AlreadyEnqueued):  # queued already, and not taken yet
            await job.defer_async(**run_job_args(org_id, run_id))

    async def reserve(self, org_id: OrgId) -> None:
        """None: an API process in worker mode executes no run; each is queued for a worker."""
        return None

    async def health(self) -> dict[str, int] | None:
        """Live workers and runs waiting for one; None when the queue cannot be reached."""
        try:
            [row] = await self.app.connector.execute_query_all_async(_HEALTH, task=TASK, lost=self.lost_seconds)
        except (OSError, psycopg.Error, ConnectorException):  # procrastinate wraps psycopg's errors
            return None
        return {"workers": row["workers"], "queued_runs": row["queued"]}

    async def cancel(self, run_id: RunId) -> bool:
        """Aborts the run's job if a worker holds it; the run records itself cancelled there. A job that waits in
        the queue for a slot is made due now: a worker takes it, and the run, admitted without a slot, records its
        end. Returns False: the run never executes in this process."""
        try:
            await self.app.connector.execute_query_async(_ABORT_IF_HELD, lock=str(run_id), task=TASK)
            await self.app.connector.execute_query_async(DUE_NOW, lock=str(run_id), task=TASK)
        except (ConnectorException, psycopg.Error, OSError) as error:
            # The cancel is stored: the run ends at its next step, or as its job is next taken.
            logger.warning("a run's cancel could not reach its job: %s", error, extra={"run_id": str(run_id)})
        return False


class HandedBack(Exception):
    """A run's job ends so because its worker stopped before the run did: the job goes back to the queue."""


class NotStarted(Exception):
    """A run's job ends so when the run could not start or go on (the database did not answer in time: its pool
    was exhausted, or it was down): the run stays as stored, and its job is tried again shortly (it goes on from
    its last stored step)."""


class _RunRetries(procrastinate.BaseRetryStrategy):
    """A job handed back is taken again at once; one whose run could not start, a few seconds later. Any other
    error ends the job (the run recorded how it ended, or is left to the lost-run recovery)."""

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> procrastinate.RetryDecision | None:
        if job.attempts >= MAX_TRIES:
            return None
        if isinstance(exception, HandedBack):
            return procrastinate.RetryDecision(retry_in={"seconds": 0})
        if isinstance(exception, NotStarted):
            return procrastinate.RetryDecision(retry_in={"seconds": NOT_STARTED_RETRY_SECONDS})
        return None


_TO_RETRY = "SELECT status, attempts, abort_requested FROM procrastinate_jobs WHERE id = %(job)s FOR UPDATE"
RETRY_PAUSES = (0.5, 1.0, 2.0, 5.0)
"""The pauses between tries of a run job's retry that met an outage (the last one repeated)."""
RETRY_TRY_SECONDS = 10.0
"""How long one try of a run job's retry may take."""


async def _outage_in(retry: Callable[[], Awaitable[None]]) -> BaseException | None:
    """One try of a run job's retry (a try may wait for a connection, or for the row's lock that a connection cut off
    still holds): None once made; the error when the database did not answer. Any other error is raised."""
    try:
        async with asyncio.timeout(RETRY_TRY_SECONDS):
            await retry()
    except (ConnectorException, psycopg.Error, OSError, TimeoutError) as error:
        if not _an_outage(error):
            raise
        return error
    return None


async def _until_the_database_answers(retry: Callable[[], Awaitable[None]]) -> None:
    """A run job's retry that met an outage, tried again until the database answers, however long it is down: given
    up, the job would stay held by this live worker and its run queued, its thread busy, until the worker stops. A
    worker that stops meanwhile drops it (its job, held still, is the lost workers' recovery's)."""
    for pause in itertools.chain(RETRY_PAUSES, itertools.repeat(RETRY_PAUSES[-1])):
        await asyncio.sleep(pause)
        try:
            outage = await _outage_in(retry)
        except Exception:  # a statement's own: not tried again
            logger.exception("a run's job could not go back to the queue; its worker holds it still")
            return
        if outage is None:
            logger.info("a run's job went back to the queue once the database answered")
            return


def _an_outage(error: BaseException) -> bool:
    """Whether an error of the job queue is the database not answering (no connection, or it was lost), not one of
    a statement (procrastinate wraps psycopg's errors)."""
    cause = error.__cause__ if isinstance(error, ConnectorException) else error
    return isinstance(
        cause, psycopg.OperationalError | psycopg.InterfaceError | psycopg.errors.ReadOnlySqlTransaction | OSError
    ) or isinstance(error, TimeoutError)


class _RunJobs(JobManager):
    """procrastinate's jobs, a run's job tried again so that its run keeps one job. A run's job is tried again when
    its run was handed back or could not start (HandedBack, NotStarted: the retries of _RunRetries), and:
    - procrastinate fails a job whose abort was requested instead of queueing it again
      (`procrastinate_retry_job_v2`), and a user's cancel may request it at any moment until then: such a run gets
      a job of its own (its count of tries starts again), due when the retry would have been; taken, the run records
      its end as its stored cancel says;
    - procrastinate queues again a job that failed meanwhile, and a lost worker's job fails as its run is taken
      over (_take_over_stalled_jobs, with a job of its own): a worker that was only cut off, back, leaves it failed.
    One transaction, the job's row locked first: a cancel waits for it (and then finds the job back in the queue,
    not held), and a worker that stops half-way leaves its job held, for the lost workers' recovery. A run whose
    job is tried again because the database did not answer (NotStarted) may find it down still: the retry is then
    tried again in the background until the database answers, else the job would stay held by a live worker, its
    run queued for good. In the background: a worker that stops meanwhile does not wait for it (its job, held still,
    is the lost workers' recovery's)."""

    def __init__(self, connector: Any) -> None:
        super().__init__(connector)
        self._retrying: set[asyncio.Task[None]] = set()

    async def retry_job(
        self,
        job: Job,
        retry_at: datetime.datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        lock: str | None = None,
    ) -> None:
        if job.task_name != TASK:
            await super().retry_job(job, retry_at=retry_at, priority=priority, queue=queue, lock=lock)
            return
        retry = functools.partial(self._retried, job, retry_at, priority, queue, lock)
        outage = await _outage_in(retry)
        if outage is None:
            return
        logger.warning("a run's job could not go back to the queue: %s; trying again", outage)
        task = asyncio.create_task(_until_the_database_answers(retry), name=f"retry-job-{job.id}")
        self._retrying.add(task)
        task.add_done_callback(self._retrying.discard)

    async def _retried(
        self, job: Job, retry_at: datetime.datetime | None, priority: int | None, queue: str | None, lock: str | None
    ) -> None:
        connector = cast(procrastinate.PsycopgConnector, self.connector)
        async with connector.pool.connection() as connection, connection.transaction():
            rows = await connector.execute_query_all_async_with_connection(connection, _TO_RETRY, job=job.id)
            # As this worker took it: a try whose reply was lost may have put it back in the queue, and another
            # worker may hold it again since (its attempts counted one more).
            if not rows or rows[0]["status"] != Status.DOING.value or rows[0]["attempts"] != job.attempts:
                logger.info(
                    "a run's job no longer held (back in the queue, or taken over) is left as it is",
                    extra={"job_id": job.id},
                )
                return
            await connector.execute_query_all_async_with_connection(
                connection,
                procrastinate_sql.queries["retry_job"],
                job_id=job.id,
                retry_at=retry_at or datetime.datetime.now(datetime.UTC),
                new_priority=priority,
                new_queue_name=queue,
                new_lock=lock,
            )
            if not rows[0]["abort_requested"]:
                return
            run_id = RunId(UUID(str(job.task_kwargs["run_id"])))
            again = Job(
                queue=queue or job.queue,
                priority=job.priority if priority is None else priority,
                task_name=TASK,
                task_kwargs=job.task_kwargs,
                scheduled_at=retry_at,
                **run_job_locks(run_id),
            )
            with contextlib.suppress(AlreadyEnqueued):  # (queued again meanwhile: resumed by its client)
                async with connection.transaction():  # (a savepoint: the retry stands)
                    await self.defer_job_async(again, connection=connection)


class WorkerRuns:
    """The worker side: executes the runs of the jobs the worker takes. A job aborted by a user's cancel
    cancels its run (which records itself cancelled); one aborted because the worker stops (after its grace
    period) hands the run back: it stays as stored, and its job is queued again for another worker."""

    def __init__(self, execute: Execute, admission: RunAdmission | None = None) -> None:
        self._execute, self._admission = execute, admission

    async def execute(self, context: JobContext, org_id: OrgId, run_id: RunId) -> None:
        current_run.set(str(run_id))  # the job's log lines, and the run's, name the run
        try:
            if self._admission is not None:
                admission = await self._admitted(context, org_id, run_id)
                if admission is None:
                    return
                current_request_id.set(admission.request_id)
            try:
                await self._executed(context, org_id, run_id)
            finally:
                if self._admission is not None:  # the slot is kept while the run still executes
                    await self._quietly("a run's slot could not be given back", self._admission.release(run_id))
        except StorageUnavailable as error:
            logger.warning("a run could not start or go on: %s; its job is tried again shortly", error.detail)
            raise NotStarted(str(run_id)) from None

    async def _admitted(self, context: JobContext, org_id: OrgId, run_id: RunId) -> Admission | None:
        """The run admitted; or None: refused, its job back in the queue (due when a slot is given back, or at once
        for a cancel). Carried to its end through an abort of the job (a user's cancel, or the worker stopping):
        stopped half-way, it could leave the run with no job, or with a slot and nothing executing it."""
        step = asyncio.create_task(self._admit(context, org_id, run_id))
        aborted = False
        while not step.done():
            try:
                await asyncio.shield(step)
            except asyncio.CancelledError:
                if step.cancelled():
                    raise  # the step's own (a bug): not an abort
                aborted = True  # (a user's cancel, then the worker stopping: one abort after the other)
                _uncancel()
        admission = step.result()
        if aborted and admission is not None and context.abort_reason() is AbortReason.SHUTDOWN:
            raise HandedBack(str(run_id))  # taken again at once, its slot kept
        return admission  # after a user's cancel (stored before): admitted, the run executes to record it

    async def _admit(self, context: JobContext, org_id: OrgId, run_id: RunId) -> Admission | None:
        assert self._admission is not None
        admission = await self._admission.admit(org_id, run_id)
        if admission.admitted:
            return admission
        try:
            await _later(context, org_id, run_id)
        except (ConnectorException, psycopg.Error, OSError) as error:  # this job is tried again shortly
            raise StorageUnavailable(f"the run could not go back to the queue: {error}") from None
        # A slot given back between the refusal and the job's return found nothing to wake: wake now.
        await self._quietly("the runs waiting for a slot could not be woken", self._admission.wake(org_id))
        # A cancel stored meanwhile may have found no job to make due (QueueRunExecutor.cancel): made due now.
        try:
            await context.app.connector.execute_query_async(DUE_NOW_IF_CANCELLED, lock=str(run_id), task=TASK)
        except (ConnectorException, psycopg.Error, OSError) as error:
            logger.warning("a cancelled run waiting for a slot could not be made due: %s", error)
        return None

    @staticmethod
    async def _quietly(what: str, step: Coroutine[object, None, None]) -> None:
        """A slot not given back, or waiting runs not woken, for an outage: nothing is lost (a run gives its slot
        back with the write that stops it), and the runs waiting look again within ADMISSION_RETRY_SECONDS."""
        try:
            await step
        except StorageUnavailable as error:
            logger.warning("%s: %s", what, error.detail)

    async def _executed(self, context: JobContext, org_id: OrgId, run_id: RunId) -> None:
        """A run that cannot be stored pauses (its job tried again), unless its job was tried OUTAGE_TRIES times."""
        pausing = context.job.attempts + 1 < OUTAGE_TRIES
        task = asyncio.create_task(self._execute(org_id, run_id, hand_back_on_outage=pausing), name=f"run-{run_id}")
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            stopping = context.abort_reason() is AbortReason.SHUTDOWN
            task.cancel(HANDED_BACK if stopping else None)
            try:
                await task
            except asyncio.CancelledError:
                if not stopping:
                    await _unless_ended(context, org_id, run_id)
            except StorageUnavailable:
                # The user's cancel could not be stored. Its job, aborted, is not tried again: another one, due
                # shortly, ends the run then as its stored cancel request says.
                try:
                    await _later(context, org_id, run_id, in_seconds=NOT_STARTED_RETRY_SECONDS)
                except (ConnectorException, psycopg.Error, OSError) as error:
                    logger.warning("a cancelled run could not be queued again to end it: %s", error)
            if stopping:
                logger.info("run handed back to the queue: the worker stops", extra={"run_id": str(run_id)})
                raise HandedBack(str(run_id)) from None
            raise


def _uncancel() -> None:
    """A cancellation of the current task caught and carried through: it no longer counts as one under way (an
    asyncio.timeout in the task would otherwise take its expiry for it)."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


_UNFINISHED = f"SELECT 1 FROM runs WHERE id = %(run)s::uuid AND {executing('runs')}"
"""A run that still executes: queued, in progress, or asking its user in an open tool call (its worker gone, the
next taker ends it)."""


async def _unless_ended(context: JobContext, org_id: OrgId, run_id: RunId) -> None:
    """A user's cancel stopped the run before it could record its end (as it was being taken): a job of its own,
    due now, records it; else the run would stay in progress with no job."""
    try:
        if await context.app.connector.execute_query_all_async(_UNFINISHED, run=str(run_id)):
            await _later(context, org_id, run_id, in_seconds=0)
    except (ConnectorException, psycopg.Error, OSError) as error:
        logger.warning("a cancelled run that did not record its end could not be queued again: %s", error)


async def _later(
    context: JobContext, org_id: OrgId, run_id: RunId, in_seconds: float = ADMISSION_RETRY_SECONDS
) -> None:
    """The run's job back in the queue, due in `in_seconds` (the organization's slots are all taken: until woken)."""
    job = context.app.configure_task(TASK, **run_job_locks(run_id), schedule_in={"seconds": in_seconds})
    with contextlib.suppress(AlreadyEnqueued):  # queued again meanwhile (resumed by its client)
        await job.defer_async(**run_job_args(org_id, run_id))


async def work(
    executor: object,
    runs: WorkerRuns,
    *,
    queues: list[str],
    concurrency: int,
    grace_seconds: float,
    lost_seconds: float,
    signals: bool = True,
    wait: bool = True,
    stranded: Callable[[float], Awaitable[int]] | None = None,
) -> None:
    """Be a worker until SIGTERM or SIGINT (or, without `signals`, until cancelled; without `wait`, until no job is
    due): take the queues' jobs, `concurrency` at a time. The worker sends a heartbeat four times per
    `lost_seconds`; one silent for longer is lost, and its runs are taken over. A job that succeeded is deleted.
    `stranded` ends the runs with no job whose process stopped (see _take_over_lost_runs)."""
    if not isinstance(executor, QueueRunExecutor):
        raise TypeError("a worker needs the job queue executor (THREADLINE_EXECUTOR=queue)")
    await executor.app.run_worker_async(
        queues=queues,
        concurrency=concurrency,
        name=f"threadline-{socket.gethostname()}-{os.getpid()}",
        additional_context={RUNS: runs, LOST_SECONDS: lost_seconds, STRANDED: stranded},
        shutdown_graceful_timeout=grace_seconds,
        update_heartbeat_interval=lost_seconds / 4,
        stalled_worker_timeout=lost_seconds,
        install_signal_handlers=signals,
        listen_notify=True,
        fetch_job_polling_interval=POLL_SECONDS,
        delete_jobs=DeleteJobCondition.SUCCESSFUL,
        wait=wait,
    )
