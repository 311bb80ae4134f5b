"""Usage accounting and the audit log: a ledger line per model call (organization, agent, model, day, tokens,
tool calls; filled from the steps runs already stored), and an append-only log of admins' changes.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23
"""

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 500
_json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _stored_steps(connection: sa.Connection) -> Iterator[dict[str, Any]]:
    runs = sa.table(
        "runs",
        sa.column("id", sa.Uuid),
        sa.column("org_id", sa.Uuid),
        sa.column("agent_id", sa.Uuid),
        sa.column("steps", _json),
    )
    after = None
    while True:
        query = sa.select(runs).order_by(runs.c.id).limit(_BATCH)
        if after is not None:
            query = query.where(runs.c.id > after)
        rows = connection.execute(query).all()
        if not rows:
            return
        for run in rows:
            for step in run.steps or []:
                completed = datetime.fromisoformat(step["completed_at"])
                completed = completed if completed.tzinfo else completed.replace(tzinfo=UTC)
                yield {
                    "run_id": run.id,
                    "step": step["number"],
                    "org_id": run.org_id,
                    "agent_id": run.agent_id,
                    "model": step["model"],
                    "day": completed.astimezone(UTC).date(),
                    "input_tokens": step.get("input_tokens", 0),
                    "output_tokens": step.get("output_tokens", 0),
                    "cached_tokens": step.get("cached_tokens", 0),
                    "tool_calls": len(step.get("tool_calls", [])),
                }
        after = rows[-1].id


def upgrade() -> None:
    usage = op.create_table(
        "usage_records",
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("agent_id", sa.Uuid(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cached_tokens", sa.BigInteger(), nullable=False),
        sa.Column("tool_calls", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_usage_records_org_id_organizations", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "step", name="pk_usage_records"),
    )
    op.create_index("ix_usage_records_org_id_day", "usage_records", ["org_id", "day"])
    op.create_table(
        "audit_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("object_type", sa.String(length=32), nullable=False),
        sa.Column("object_id", sa.String(length=200), nullable=False),
        sa.Column("actor_key_id", sa.Uuid(), nullable=True),
        sa.Column("changes", _json, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_audit_events_org_id_organizations", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_audit_events"),
    )
    op.create_index("ix_audit_events_org_id_id", "audit_events", ["org_id", "id"])
    op.create_index(
        "ix_audit_events_org_id_object_type_object_id_id", "audit_events", ["org_id", "object_type", "object_id", "id"]
    )
    # The usage of the runs stored so far, so the ledger agrees with every run from the start.
    connection = op.get_bind()
    batch: list[dict[str, Any]] = []
    for line in _stored_steps(connection):
        batch.append(line)
        if len(batch) >= _BATCH:
            connection.execute(sa.insert(usage), batch)
            batch = []
    if batch:
        connection.execute(sa.insert(usage), batch)


def downgrade() -> None:
    op.drop_index("ix_audit_events_org_id_object_type_object_id_id", table_name="audit_events")
    op.drop_index("ix_audit_events_org_id_id", table_name="audit_events")
    op.drop_table("audit_events")
    op.drop_index("ix_usage_records_org_id_day", table_name="usage_records")
    op.drop_table("usage_records")
