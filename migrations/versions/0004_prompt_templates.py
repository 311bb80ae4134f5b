"""Prompt templates and the argument values organizations used.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "prompt_templates",
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("arguments", JSON, nullable=False),
        sa.Column("messages", JSON, nullable=False),
        sa.Column("agent_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_prompt_templates_org_id_organizations", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name="fk_prompt_templates_agent_id_agents", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("org_id", "name", name="pk_prompt_templates"),
    )
    op.create_table(
        "prompt_argument_values",
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("template", sa.String(64), nullable=False),
        sa.Column("argument", sa.String(64), nullable=False),
        sa.Column("value", sa.String(500), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_prompt_argument_values_org_id_organizations", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("org_id", "template", "argument", "value", name="pk_prompt_argument_values"),
    )
    op.create_index(
        "ix_prompt_argument_values_recent",
        "prompt_argument_values",
        ["org_id", "template", "argument", "last_used_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_prompt_argument_values_recent", table_name="prompt_argument_values")
    op.drop_table("prompt_argument_values")
    op.drop_table("prompt_templates")
