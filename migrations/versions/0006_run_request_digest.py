"""Runs remember a fingerprint of the request their idempotency key started them with, so the same key
sent with a different request is refused instead of answered with another request's run.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("request_digest", sa.String(64), nullable=True))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite 3.35+ has it): no table copy, so no cascade reaches the runs' events.
    op.drop_column("runs", "request_digest")
