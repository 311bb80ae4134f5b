"""A thread has one unfinished run at most, kept by the database as well: a partial unique index on runs'
thread_id over the statuses of a run not ended (queued, in_progress, requires_action).

Creating a run locks its thread and refuses a thread that has one (ThreadBusy); the index makes that hold for
any code that writes runs, in any process. A database that already holds two unfinished runs in one thread (only
a defect could have written them) is not changed: the upgrade stops and names the threads, for an operator to
end the extra runs before migrating again (the server runs without it: `threadline serve --no-migrate`, then
POST /v1/runs/{id}/cancel).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27
"""

from collections.abc import Sequence
from uuid import UUID

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNFINISHED = "status IN ('queued', 'in_progress', 'requires_action')"
INDEX = "uq_runs_thread_id_unfinished"


def upgrade() -> None:
    crowded = (
        op.get_bind()
        .execute(
            sa.text(
                f"SELECT thread_id, id FROM runs WHERE {UNFINISHED} AND thread_id IN"
                f" (SELECT thread_id FROM runs WHERE {UNFINISHED} GROUP BY thread_id HAVING count(*) > 1)"
                " ORDER BY thread_id, created_at LIMIT 50"
            )
        )
        .all()
    )
    if crowded:
        runs: dict[str, list[str]] = {}
        for thread_id, run_id in crowded:  # (SQLite keeps them as 32 hex digits)
            runs.setdefault(str(UUID(str(thread_id))), []).append(str(UUID(str(run_id))))
        listed = "; ".join(f"thread {thread}: runs {', '.join(ids)}" for thread, ids in runs.items())
        raise RuntimeError(
            f"threads with more than one unfinished run ({listed}); cancel all but one run of each thread"
            " (start the server with `threadline serve --no-migrate`, POST /v1/runs/{id}/cancel), then migrate again"
        )
    where = sa.text(UNFINISHED)
    op.create_index(INDEX, "runs", ["thread_id"], unique=True, postgresql_where=where, sqlite_where=where)


def downgrade() -> None:
    op.drop_index(INDEX, table_name="runs")
