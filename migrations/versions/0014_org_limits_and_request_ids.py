"""Operating many organizations on one deployment: an organization may have limits of its own (runs at once,
runs per minute; unset: the deployment's), a run remembers the request that created it and whether it was
admitted under its organization's limit, and fixed-window counters back the rate limits across processes.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("organizations", sa.Column("max_concurrent_runs", sa.Integer(), nullable=True))
    op.add_column("organizations", sa.Column("runs_per_minute", sa.Integer(), nullable=True))
    op.add_column("runs", sa.Column("request_id", sa.String(128), nullable=True))
    op.add_column("runs", sa.Column("admitted_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "rate_limit_windows",
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("window_start", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key", "window_start", name=op.f("pk_rate_limit_windows")),
    )


def downgrade() -> None:
    op.drop_table("rate_limit_windows")
    # Plain DROP COLUMNs (SQLite 3.35+ has them): no table copy, so no cascade reaches the runs' events.
    op.drop_column("runs", "admitted_at")
    op.drop_column("runs", "request_id")
    op.drop_column("organizations", "runs_per_minute")
    op.drop_column("organizations", "max_concurrent_runs")
