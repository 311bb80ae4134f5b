"""Two indexes on the job queue, on PostgreSQL only: queued and running jobs by their lock, and queued jobs by their
organization and the time they are due.

A worker takes a job with procrastinate's `procrastinate_fetch_job_v2`, which passes over a job while another job
with the same lock (a run's jobs have the run as their lock) is running or ahead of it. procrastinate indexes the
lock of running jobs, but that of queued jobs only behind their id (`(id, lock)`), so each of those checks read the
whole index. When the planner picks a plan that checks every queued job before taking the first (it does while the
table has no statistics yet, as in a burst of runs on a new database), a take cost O(queued jobs) such reads:
1,000 runs at once on one worker spent 20-40 ms of PostgreSQL's time per job taken, most of the database's time.
With the lock first in an index, each check is one lookup.

As each run ends in worker mode, its slot is given back and the runs of its organization that sleep until then
(refused for want of a slot, their jobs due later) are looked for (infrastructure/limits/admission.py). That
question now starts from the organization's run jobs due later, through the second index (a run job's arguments
name its organization), where it joined all of the organization's waiting runs: all of a burst's.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BY_LOCK = "ix_procrastinate_jobs_lock_todo_doing"
BY_ORG_AND_TIME = "ix_procrastinate_jobs_org_scheduled_at_todo"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":  # the job queue is PostgreSQL's only
        op.execute(f"CREATE INDEX {BY_LOCK} ON procrastinate_jobs (lock) WHERE status IN ('todo', 'doing')")
        op.execute(
            f"CREATE INDEX {BY_ORG_AND_TIME} ON procrastinate_jobs ((args ->> 'org_id'), scheduled_at)"
            " WHERE status = 'todo'"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP INDEX {BY_ORG_AND_TIME}")
        op.execute(f"DROP INDEX {BY_LOCK}")
