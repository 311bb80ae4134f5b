"""Runs keep the questions the servers of their MCP tool calls ask the user (elicitation), with the answers until
the calls are carried on with them: `awaiting_input`, a JSON list beside `required_action`.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json = sa.JSON().with_variant(JSONB(), "postgresql")
    op.add_column("runs", sa.Column("awaiting_input", json, nullable=False, server_default="[]"))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite 3.35+ has it): no table copy, so no cascade reaches the runs' events.
    op.drop_column("runs", "awaiting_input")
