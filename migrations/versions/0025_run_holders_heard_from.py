"""Worker mode: every process that holds runs (`runs.holder`: the one that created, took or resumed a run last to
execute it) says now and then that it lives, in a row of its own, so that the runs it executed in a caller's task
and left unfinished when it stopped can be told from those of live processes.

Such runs (a published agent called over MCP, executed by the API process that serves the call; a sub-agent's run,
executed in the task of the run that delegated to it) have no job in the queue: nothing took them on when their
process stopped, and they stayed in progress for good. The workers now end the runs with no job whose holder has
not been heard from for twice `THREADLINE_WORKER_LOST_SECONDS` (infrastructure/persistence/run_holders.py). A process
that never wrote a row (one of a version before this) is not judged: its runs are left as they were.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_holders",
        sa.Column("holder", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("holder", name=op.f("pk_run_holders")),
    )


def downgrade() -> None:
    op.drop_table("run_holders")
