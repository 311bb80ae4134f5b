"""Runs remember which process holds them (the one that created or took them to execute them), so a process
that starts can leave the runs of live processes alone and recover only those of processes that stopped.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("holder", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite 3.35+ has it): no table copy, so no cascade reaches the runs' events.
    op.drop_column("runs", "holder")
