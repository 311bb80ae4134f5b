"""Runs' jobs in procrastinate's queue (worker mode), inserted with the writes that make the run: a run is queued
for a worker if and only if it is stored, whatever becomes of the process that stored it."""

from sqlalchemy import Column, Integer, MetaData, String, Table, Text, text
from sqlalchemy.dialects.postgresql import JSONB, insert

from domain.ids import OrgId, RunId
from infrastructure.execution.run_queue import QUEUE, TASK, run_job_args, run_job_locks
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.prepared import Prepared

# procrastinate's own table (its schema comes with its migration, not with ours): the columns a job is queued with,
# as procrastinate_defer_jobs_v1 fills them. Its triggers tell the workers of the new job at commit.
_jobs = Table(
    "procrastinate_jobs",
    MetaData(),
    Column("queue_name", String),
    Column("task_name", String),
    Column("priority", Integer),
    Column("lock", Text),
    Column("queueing_lock", Text),
    Column("args", JSONB),
)
# A run has one job waiting at most (procrastinate's unique index on the queueing lock of jobs still to do): if one
# waits already, it is the run's, and takes it (procrastinate's defer raises AlreadyEnqueued there instead).
_INSERT = Prepared(
    insert(_jobs).on_conflict_do_nothing(index_elements=["queueing_lock"], index_where=text("status = 'todo'"))
)


WITHOUT_A_JOB = text(
    "NOT EXISTS (SELECT 1 FROM procrastinate_jobs j"
    " WHERE j.lock = CAST(runs.id AS text) AND j.status IN ('todo', 'doing'))"
)
"""A condition on runs (worker mode): no job of the run waits in the queue or executes (the index on the jobs' lock
serves it: migration 0022)."""


class SqlRunJobRepository:
    def __init__(self, connection: UnitConnection, *, queued: bool) -> None:
        self._connection, self._queued = connection, queued

    async def add(self, org_id: OrgId, run_id: RunId) -> bool:
        if not self._queued:
            return False
        job = {"queue_name": QUEUE, "task_name": TASK, "priority": 0, **run_job_locks(run_id)}
        await self._connection.later(_INSERT, job | {"args": run_job_args(org_id, run_id)})
        return True
