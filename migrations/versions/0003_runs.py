"""Runs and their events.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _timestamp(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("thread_id", sa.Uuid(), nullable=False),
        sa.Column("agent_id", sa.Uuid(), nullable=False),
        sa.Column("parent_run_id", sa.Uuid(), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("client_tools", JSON, nullable=False),
        sa.Column("required_action", JSON, nullable=False),
        sa.Column("steps", JSON, nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("error_code", sa.String(64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("warnings", JSON, nullable=False),
        sa.Column("trace_id", sa.String(64), nullable=True),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        _timestamp("started_at", nullable=True),
        _timestamp("ended_at", nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_runs_org_id_organizations", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], name="fk_runs_thread_id_threads", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.UniqueConstraint("org_id", "idempotency_key", name="uq_runs_org_id_idempotency_key"),
    )
    op.create_index("ix_runs_org_id_id", "runs", ["org_id", "id"])
    op.create_index("ix_runs_thread_id_id", "runs", ["thread_id", "id"])
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_table(
        "run_events",
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("data", JSON, nullable=False),
        _timestamp("created_at"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_run_events_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "seq", name="pk_run_events"),
    )


def downgrade() -> None:
    op.drop_table("run_events")
    op.drop_index("ix_runs_status", table_name="runs")
    op.drop_index("ix_runs_thread_id_id", table_name="runs")
    op.drop_index("ix_runs_org_id_id", table_name="runs")
    op.drop_table("runs")
