"""Foundation: organizations, API keys, agents, threads and messages.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _timestamp(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _org_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["org_id"], ["organizations.id"], name=f"fk_{table}_org_id_organizations", ondelete="CASCADE"
    )


def upgrade() -> None:
    op.create_table(
        "organizations",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("slug", sa.String(64), nullable=False),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("id", name="pk_organizations"),
        sa.UniqueConstraint("slug", name="uq_organizations_slug"),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("prefix", sa.String(32), nullable=False),
        sa.Column("secret_hash", sa.String(128), nullable=False),
        _timestamp("created_at"),
        _timestamp("revoked_at", nullable=True),
        _timestamp("last_used_at", nullable=True),
        _org_fk("api_keys"),
        sa.PrimaryKeyConstraint("id", name="pk_api_keys"),
        sa.UniqueConstraint("prefix", name="uq_api_keys_prefix"),
    )
    op.create_index("ix_api_keys_org_id", "api_keys", ["org_id"])
    op.create_table(
        "agents",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("slug", sa.String(64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("instructions", sa.Text(), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("model_settings", JSON, nullable=False),
        sa.Column("tools", JSON, nullable=False),
        sa.Column("mcp_integration_ids", JSON, nullable=False),
        sa.Column("sub_agent_ids", JSON, nullable=False),
        sa.Column("max_steps", sa.Integer(), nullable=False),
        sa.Column("parallel_tool_calls", sa.Boolean(), nullable=False),
        sa.Column("publish_as_mcp", sa.Boolean(), nullable=False),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        _org_fk("agents"),
        sa.PrimaryKeyConstraint("id", name="pk_agents"),
        sa.UniqueConstraint("org_id", "slug", name="uq_agents_org_id_slug"),
    )
    op.create_index("ix_agents_org_id_id", "agents", ["org_id", "id"])
    op.create_table(
        "threads",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("agent_id", sa.Uuid(), nullable=True),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        _org_fk("threads"),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name="fk_threads_agent_id_agents", ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name="pk_threads"),
    )
    op.create_index("ix_threads_agent_id", "threads", ["agent_id"])
    op.create_index("ix_threads_org_id_id", "threads", ["org_id", "id"])
    op.create_table(
        "messages",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("thread_id", sa.Uuid(), nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", JSON, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        _timestamp("created_at"),
        _org_fk("messages"),
        sa.ForeignKeyConstraint(
            ["thread_id"], ["threads.id"], name="fk_messages_thread_id_threads", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_messages"),
        sa.UniqueConstraint("thread_id", "position", name="uq_messages_thread_id_position"),
    )


def downgrade() -> None:
    op.drop_table("messages")
    op.drop_index("ix_threads_org_id_id", table_name="threads")
    op.drop_index("ix_threads_agent_id", table_name="threads")
    op.drop_table("threads")
    op.drop_index("ix_agents_org_id_id", table_name="agents")
    op.drop_table("agents")
    op.drop_index("ix_api_keys_org_id", table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("organizations")
