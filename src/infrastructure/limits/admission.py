"""Fair share in worker mode: a worker executes a run only while fewer of its organization's runs than the
organization's limit hold a slot, counted in the database so the limit holds for the whole deployment.

A run holds a slot from its admission (`runs.admitted_at`) until it stops executing: it ends, or waits for
its client's tool results (the slot is given back then, by the write that stores it so, and taken again when it
resumes). A run whose open tool call waits for its user's answer still executes (the call goes on in its worker with
the answer): it keeps its slot, and counts. Admissions of one
organization are serialized by a lock on its row, so two workers never both take the last slot. A run handed
back or taken over after a lost worker keeps its slot (one whose open call asked its user ends when it is taken
again: the call is gone).

Runs that wait for a slot take their turns first come, first served: a run is refused while older runs of its
organization wait for the free slots (those are woken instead), and a slot given back wakes the oldest waiting
run at once (its job, scheduled for later, is made due and the workers are notified), so a waiting run neither
waits longer than it must nor polls. A run going on after its client's answers waits as a queued one does (in
progress), in order of creation.

A run whose cancel is requested is admitted at once, without a slot: it executes only to record that end (its job,
waiting for a slot, is made due by the cancel: job_queue.QueueRunExecutor.cancel).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.ext.asyncio import AsyncConnection

from domain.ids import OrgId, RunId
from domain.organizations import RunLimits, effective_limits
from infrastructure.execution.run_queue import TASK, made_due
from infrastructure.persistence.engine import Database
from infrastructure.persistence.errors import translating
from infrastructure.persistence.tables import HOLDING_SLOT

# FOR NO KEY UPDATE: admissions of the organization wait for each other, but the writes that check a foreign key to
# it (its threads, runs, messages, usage records...) do not wait for them (see migration 0021).
_LIMIT = text("SELECT max_concurrent_runs FROM organizations WHERE id = :org FOR NO KEY UPDATE")
# A run admitted, or refused (the runs ahead of it woken), in one round trip: see migration 0019, which holds the
# admission's statements (the organization's lock, FOR NO KEY UPDATE since migration 0021, and the slots held and
# the waiting runs ahead counted after it).
_ADMIT_RUN = text("SELECT admitted, request_id FROM threadline_admit_run(:org, :run, :default_limit)")
# The slots held, the waiting runs and their wake below are also written in threadline_admit_run (migration 0019,
# changed by 0021 and 0024: the admission's side, in SQL): a change to one is made to the other (in a new migration).
# The slots held in the organization: its runs admitted and not ended (tables.HOLDING_SLOT, the predicate of their
# index, which the query must imply for the index to serve it).
_HOLDING_COUNT = f"SELECT count(*) FROM runs WHERE org_id = :org AND {HOLDING_SLOT}"
_HOLDING = text(_HOLDING_COUNT)
# The organization's runs that wait for a slot (queued or going on after their client's answers, not admitted:
# tables.WAITING_FOR_SLOT, the predicate of their index, here with the runs' alias), their cancel not requested (a
# cancelled one is admitted without a slot), with their job (`j`) in the queue.
_WAITING_RUN = "r.status IN ('queued', 'in_progress') AND r.admitted_at IS NULL AND NOT r.cancel_requested"
_WAITING_JOBS = (
    "runs r JOIN procrastinate_jobs j ON j.queueing_lock = CAST(r.id AS text) AND j.status = 'todo'"
    f" WHERE r.org_id = :org AND {_WAITING_RUN}"
)


def executing(run: str) -> str:
    """A condition on the run `run` (a name of runs): it still executes (`Run.executes`), queued or in progress, or
    its open tool call waiting for its user's answer (a question asked live, in its worker)."""
    return (
        f"({run}.status IN ('queued', 'in_progress') OR {run}.status = 'requires_action'"
        f""" AND {run}.awaiting_input @> '[{{"live": true}}]')"""
    )


_RELEASE = text(f"UPDATE runs e SET admitted_at = NULL WHERE e.id = :run AND NOT {executing('e')}")


# Whether a waiting run of the organization `org` (an SQL expression: its id) sleeps until a slot is given back:
# refused, its job due later. (A job just queued is due already, and its workers were told: there is nothing to
# wake.) Asked as each run ends: it starts from the organization's run jobs due later (indexed by organization and
# time: migration 0022; `args ->> 'org_id'` is the id as run_job_args writes it), not from its waiting runs (all of
# a burst's); a run's id is read from a run job's arguments only (another task's job has none).
def _sleeping(org: str) -> str:
    return (
        "EXISTS (SELECT 1 FROM procrastinate_jobs j"
        f" JOIN runs r ON r.id = CASE WHEN j.task_name = '{TASK}' THEN CAST(j.args ->> 'run_id' AS uuid) END"
        f" WHERE j.status = 'todo' AND j.args ->> 'org_id' = CAST({org} AS text) AND j.scheduled_at > now()"
        f" AND j.task_name = '{TASK}' AND r.org_id = {org} AND {_WAITING_RUN})"
    )


_ANY_SLEEPING = text(f"SELECT {_sleeping('CAST(:org AS uuid)')}")
# A run that no longer executes, whether it still holds its slot (its last write gives it back: SqlRunRepository.save;
# not so a run ended by an earlier version), and whether runs of its organization sleep: one round trip as a run's
# job ends. Asked after that last write committed, so a run refused before it and queued again after this question
# wakes itself (see WorkerRuns), and sees the slot free.
_STOPPED = text(
    f"SELECT e.org_id, e.admitted_at IS NOT NULL AS holding, {_sleeping('e.org_id')} AS sleeping"
    f" FROM runs e WHERE e.id = :run AND NOT {executing('e')}"
)
# The oldest waiting runs' jobs.
_WAITING = text(f"SELECT j.id FROM {_WAITING_JOBS} ORDER BY r.created_at, r.id LIMIT :count")
# The job is due now, and the workers hear of it as of a new job.
_WAKE = text(made_due("id = :job"))


@dataclass(frozen=True, kw_only=True)
class Admission:
    admitted: bool
    request_id: str | None = None
    """The id of the request that created the run (for its log lines and trace)."""


class RunAdmission:
    def __init__(self, database: Database, *, default_limit: int) -> None:
        self._database = database
        self._default = RunLimits(max_concurrent_runs=default_limit, runs_per_minute=None)
        self._autocommit = database.engine.execution_options(isolation_level="AUTOCOMMIT")
        """The same connections, each statement a transaction of its own (one round trip)."""

    def _limit(self, own: int | None) -> int:
        return effective_limits(own, None, self._default).max_concurrent_runs

    async def admit(self, org_id: OrgId, run_id: RunId) -> Admission:
        """Raises StorageUnavailable when the database does not answer (as the release and the wake do)."""
        with translating():
            return await self._admit(org_id, run_id)

    async def _admit(self, org_id: OrgId, run_id: RunId) -> Admission:
        """Admitted when a slot is free and no older run waits for it (those are woken instead); a run that is not
        to execute (ended, or gone) is admitted: its execution says so. The organization's own limit, else the
        deployment's (effective_limits)."""
        params = {"org": org_id, "run": run_id, "default_limit": self._default.max_concurrent_runs}
        async with self._autocommit.connect() as conn:
            row = (await conn.execute(_ADMIT_RUN, params)).one()
        return Admission(admitted=row.admitted, request_id=row.request_id)

    async def release(self, run_id: RunId) -> None:
        """Give the run's slot back unless it still executes (it ended, or waits for its client: its last write gave
        it back already); the oldest run of its organization waiting for a slot is woken."""
        with translating():
            async with self._autocommit.connect() as conn:
                stopped = (await conn.execute(_STOPPED, {"run": run_id})).first()
                if stopped is None:
                    return
                sleeping = stopped.sleeping
                if stopped.holding:
                    await conn.execute(_RELEASE, {"run": run_id})
                    # Asked again once the slot given back is committed (as _STOPPED is after the last write).
                    sleeping = (await conn.execute(_ANY_SLEEPING, {"org": stopped.org_id})).scalar_one()
        if sleeping:
            await self.wake(OrgId(stopped.org_id))

    async def wake(self, org_id: OrgId) -> None:
        """Wake as many of the organization's waiting runs as it has free slots (after a run was refused, in
        case a slot was given back before its job was queued again)."""
        with translating():
            async with self._database.engine.begin() as conn:
                await self._wake_waiting(conn, org_id)

    async def _wake_waiting(self, conn: AsyncConnection, org_id: OrgId) -> None:
        params = {"org": org_id}
        own = (await conn.execute(_LIMIT, params)).first()
        if own is None:
            return
        free = self._limit(own.max_concurrent_runs) - (await conn.execute(_HOLDING, params)).scalar_one()
        if free > 0:
            await _wake(conn, (await conn.execute(_WAITING, params | {"count": free})).all())


async def _wake(conn: AsyncConnection, jobs: Sequence[Row[Any]]) -> None:
    for job in jobs:
        await conn.execute(_WAKE, {"job": job.id})
