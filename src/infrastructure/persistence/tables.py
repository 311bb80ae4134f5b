"""The schema, as SQLAlchemy Core tables. Alembic migrations are the only way it is created."""

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
)
from sqlalchemy.dialects.postgresql import JSONB

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

Json = JSON().with_variant(JSONB(), "postgresql")


def _timestamp(name: str, nullable: bool = False) -> Column[object]:
    return Column(name, DateTime(timezone=True), nullable=nullable)


organizations = Table(
    "organizations",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("slug", String(64), nullable=False, unique=True),
    _timestamp("created_at"),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    Column("role", String(16), nullable=False),
    Column("prefix", String(32), nullable=False, unique=True),
    Column("secret_hash", String(128), nullable=False),
    _timestamp("created_at"),
    _timestamp("revoked_at", nullable=True),
    _timestamp("last_used_at", nullable=True),
)

agents = Table(
    "agents",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("slug", String(64), nullable=False),
    Column("description", Text, nullable=False),
    Column("instructions", Text, nullable=False),
    Column("model", String(200), nullable=False),
    Column("model_settings", Json, nullable=False),
    Column("tools", Json, nullable=False),
    Column("mcp_integration_ids", Json, nullable=False),
    Column("sub_agent_ids", Json, nullable=False),
    Column("max_steps", Integer, nullable=False),
    Column("parallel_tool_calls", Boolean, nullable=False),
    Column("publish_as_mcp", Boolean, nullable=False),
    _timestamp("created_at"),
    _timestamp("updated_at"),
    UniqueConstraint("org_id", "slug"),
    Index(None, "org_id", "id"),
)

threads = Table(
    "threads",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("agent_id", Uuid, ForeignKey("agents.id", ondelete="SET NULL"), nullable=True, index=True),
    Column("title", String(500), nullable=False),
    Column("metadata", Json, nullable=False),
    Column("message_count", Integer, nullable=False),
    _timestamp("created_at"),
    _timestamp("updated_at"),
    Index(None, "org_id", "id"),
)

messages = Table(
    "messages",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("thread_id", Uuid, ForeignKey("threads.id", ondelete="CASCADE"), nullable=False),
    Column("run_id", Uuid, nullable=True),
    Column("role", String(16), nullable=False),
    Column("content", Json, nullable=False),
    Column("position", Integer, nullable=False),
    _timestamp("created_at"),
    UniqueConstraint("thread_id", "position"),
)
