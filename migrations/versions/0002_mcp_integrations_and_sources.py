"""MCP integrations and sources.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _timestamp(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "mcp_integrations",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("slug", sa.String(64), nullable=False),
        sa.Column("transport", sa.String(32), nullable=False),
        sa.Column("url", sa.String(2048), nullable=True),
        sa.Column("server", sa.String(200), nullable=True),
        sa.Column("auth_type", sa.String(16), nullable=False),
        sa.Column("auth_header_name", sa.String(100), nullable=True),
        sa.Column("credentials_ciphertext", sa.Text(), nullable=True),
        sa.Column("credentials_last4", sa.String(4), nullable=True),
        sa.Column("tool_filter_mode", sa.String(16), nullable=False),
        sa.Column("tool_filter_names", JSON, nullable=False),
        sa.Column("timeout_seconds", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("connection_status", sa.String(16), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        _timestamp("last_checked_at", nullable=True),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name="fk_mcp_integrations_org_id_organizations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_integrations"),
        sa.UniqueConstraint("org_id", "slug", name="uq_mcp_integrations_org_id_slug"),
    )
    op.create_index("ix_mcp_integrations_org_id_id", "mcp_integrations", ["org_id", "id"])
    op.create_table(
        "sources",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("thread_id", sa.Uuid(), nullable=True),
        sa.Column("agent_id", sa.Uuid(), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(500), nullable=False),
        sa.Column("origin_type", sa.String(32), nullable=False),
        sa.Column("origin_integration_id", sa.Uuid(), nullable=True),
        sa.Column("origin_uri", sa.Text(), nullable=True),
        sa.Column("mime_type", sa.String(200), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("created_by", sa.String(16), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("data", JSON, nullable=True),
        sa.Column("blob", sa.LargeBinary(), nullable=True),
        _timestamp("created_at"),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_sources_org_id_organizations", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], name="fk_sources_thread_id_threads", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name="fk_sources_agent_id_agents", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_sources"),
    )
    op.create_index("ix_sources_thread_id_id", "sources", ["thread_id", "id"])
    op.create_index("ix_sources_agent_id_id", "sources", ["agent_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_sources_agent_id_id", table_name="sources")
    op.drop_index("ix_sources_thread_id_id", table_name="sources")
    op.drop_table("sources")
    op.drop_index("ix_mcp_integrations_org_id_id", table_name="mcp_integrations")
    op.drop_table("mcp_integrations")
