"""Runs may carry instructions of their own, added to their agent's for that run only (the system messages
of a Chat Completions request, the `instructions` of a Responses request).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("instructions", sa.Text(), nullable=True))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite 3.35+ has it): no table copy, so no cascade reaches the runs' events.
    op.drop_column("runs", "instructions")
