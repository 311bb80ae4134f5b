"""Runs carry a lease: bumped whenever a process takes a run to execute it, and checked by every write of the
run, so a process that lost the run to another (thought lost, taken over) can no longer write it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("lease", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite 3.35+ has it): no table copy, so no cascade reaches the runs' events.
    op.drop_column("runs", "lease")
