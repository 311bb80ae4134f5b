"""The schema, as SQLAlchemy Core tables. Alembic migrations are the only way it is created."""

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    literal_column,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql import ColumnElement

from domain.runs import RunStatus

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
    # The text search configuration its sources' passages are indexed in (PostgreSQL).
    Column("search_language", String(64), nullable=False, server_default="english"),
    Column("max_concurrent_runs", Integer, nullable=True),
    Column("runs_per_minute", Integer, nullable=True),
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

thread_summaries = Table(
    "thread_summaries",
    metadata,
    Column("thread_id", Uuid, ForeignKey("threads.id", ondelete="CASCADE"), primary_key=True),
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("covers_upto", Integer, nullable=False),  # the messages numbered below it are summarized
    Column("text", Text, nullable=False),
    _timestamp("updated_at"),
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

mcp_integrations = Table(
    "mcp_integrations",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("slug", String(64), nullable=False),
    Column("transport", String(32), nullable=False),
    Column("url", String(2048), nullable=True),
    Column("server", String(200), nullable=True),
    Column("auth_type", String(32), nullable=False),
    Column("auth_header_name", String(100), nullable=True),
    Column("credentials_ciphertext", Text, nullable=True),
    Column("credentials_last4", String(4), nullable=True),
    Column("tool_filter_mode", String(16), nullable=False),
    Column("tool_filter_names", Json, nullable=False),
    Column("timeout_seconds", Integer, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("connection_status", String(16), nullable=False),
    Column("last_error", Text, nullable=True),
    _timestamp("last_checked_at", nullable=True),
    _timestamp("created_at"),
    _timestamp("updated_at"),
    UniqueConstraint("org_id", "slug"),
    Index(None, "org_id", "id"),
)

# An oauth integration's grant (see domain.oauth_grants); the ciphertexts are the secret box's.
mcp_oauth_grants = Table(
    "mcp_oauth_grants",
    metadata,
    Column("integration_id", Uuid, ForeignKey("mcp_integrations.id", ondelete="CASCADE"), primary_key=True),
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("registration_ciphertext", Text, nullable=True),
    Column("tokens_ciphertext", Text, nullable=True),
    _timestamp("expires_at", nullable=True),
    Column("pending_state_digest", String(64), nullable=True),
    Column("pending_api_key_id", Uuid, nullable=True),
    Column("pending_verifier_ciphertext", Text, nullable=True),
    Column("pending_redirect_uri", String(2048), nullable=True),
    _timestamp("pending_expires_at", nullable=True),
    _timestamp("updated_at"),
)

sources = Table(
    "sources",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("thread_id", Uuid, ForeignKey("threads.id", ondelete="CASCADE"), nullable=True),
    Column("agent_id", Uuid, ForeignKey("agents.id", ondelete="CASCADE"), nullable=True),
    Column("kind", String(16), nullable=False),
    Column("name", String(500), nullable=False),
    Column("origin_type", String(32), nullable=False),
    Column("origin_integration_id", Uuid, nullable=True),
    Column("origin_uri", Text, nullable=True),
    Column("mime_type", String(200), nullable=True),
    Column("size", BigInteger, nullable=False),
    Column("created_by", String(16), nullable=False),
    Column("text", Text, nullable=True),
    Column("data", Json, nullable=True),
    Column("blob", LargeBinary, nullable=True),
    _timestamp("created_at"),
    Column("content_hash", String(64), nullable=True),
    Index(None, "thread_id", "id"),
    Index(None, "agent_id", "id"),
    Index(None, "org_id", "content_hash"),
)

# The full-text index over `heading` and `text` is the migration's (0011): an FTS5 table on SQLite, a
# `search_vector` column with a GIN index on PostgreSQL; see migrations.described_by_tables.
source_passages = Table(
    "source_passages",
    metadata,
    Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True),
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("source_id", Uuid, ForeignKey("sources.id", ondelete="CASCADE"), nullable=False),
    Column("thread_id", Uuid, nullable=True),
    Column("agent_id", Uuid, nullable=True),
    Column("position", Integer, nullable=False),
    Column("heading", Text, nullable=True),
    Column("page", Integer, nullable=True),
    Column("table_row", Integer, nullable=True),
    Column("text", Text, nullable=False),
    Index(None, "source_id", "position", unique=True),
    Index(None, "org_id", "thread_id"),
    Index(None, "org_id", "agent_id"),
)

passage_vectors = Table(
    "passage_vectors",
    metadata,
    Column(
        "passage_id",
        BigInteger().with_variant(Integer(), "sqlite"),
        ForeignKey("source_passages.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("model", String(200), primary_key=True),
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("source_id", Uuid, nullable=False),
    Column("vector", LargeBinary, nullable=True),  # float32, little-endian, unit length; None until embedded
    Column("embedded_at", DateTime(timezone=True), nullable=True),
    # Until embedded: the process that took the passage holds it until then (after a failure: retried then).
    Column("held_until", DateTime(timezone=True), nullable=True),
    Column("error", Text, nullable=True),
    Index(None, "org_id", "model"),
    Index(None, "source_id", "model"),
    Index(None, "held_until"),
)

UNFINISHED_STATUSES = tuple(status.value for status in RunStatus if not status.is_terminal)
"""A run's statuses until it ends (the runs a thread may have one of)."""
_UNFINISHED_LITERALS = tuple(f"'{status}'" for status in UNFINISHED_STATUSES)
UNFINISHED = f"status IN ({', '.join(_UNFINISHED_LITERALS)})"
UNFINISHED_RUN_OF_THREAD = "uq_runs_thread_id_unfinished"
HOLDING_SLOT = "admitted_at IS NOT NULL AND status IN ('queued', 'in_progress', 'requires_action')"
"""A run that holds one of its organization's slots (worker mode's admission: limits/admission.py): admitted and not
ended (the write that stores a run waiting for its client gives its slot back; one whose open tool call waits for its
user's answer still executes, and keeps it)."""
WAITING_FOR_SLOT = "status IN ('queued', 'in_progress') AND admitted_at IS NULL"
"""A run that waits for a slot (or for its first admission): queued, or going on after its client's answers."""


def is_unfinished(status: ColumnElement[str]) -> ColumnElement[bool]:
    """A run's status is one it has until it ends: the statuses written in the statement, not sent as parameters,
    so that a prepared statement's plan can read a thread's unfinished run through UNFINISHED_RUN_OF_THREAD."""
    return status.in_([literal_column(value) for value in _UNFINISHED_LITERALS])


runs = Table(
    "runs",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("thread_id", Uuid, ForeignKey("threads.id", ondelete="CASCADE"), nullable=False),
    Column("agent_id", Uuid, nullable=False),
    Column("parent_run_id", Uuid, nullable=True),
    Column("status", String(32), nullable=False),
    Column("client_tools", Json, nullable=False),
    Column("required_action", Json, nullable=False),
    Column("awaiting_input", Json, nullable=False, server_default="[]"),
    Column("steps", Json, nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("error_code", String(64), nullable=True),
    Column("error_message", Text, nullable=True),
    Column("warnings", Json, nullable=False),
    Column("trace_id", String(64), nullable=True),
    Column("idempotency_key", String(200), nullable=True),
    Column("request_digest", String(64), nullable=True),
    Column("instructions", Text, nullable=True),
    Column("cancel_requested", Boolean, nullable=False),
    _timestamp("created_at"),
    _timestamp("updated_at"),
    _timestamp("started_at", nullable=True),
    _timestamp("ended_at", nullable=True),
    Column("lease", Integer, nullable=False, server_default="0"),
    Column("holder", BigInteger, nullable=True),
    Column("request_id", String(128), nullable=True),
    _timestamp("admitted_at", nullable=True),
    UniqueConstraint("org_id", "idempotency_key"),
    Index(None, "org_id", "id"),
    Index(None, "thread_id", "id"),
    Index(None, "status"),
    # A thread has one unfinished run at most, whatever writes it (creating a run also locks its thread).
    Index(
        UNFINISHED_RUN_OF_THREAD,
        "thread_id",
        unique=True,
        postgresql_where=text(UNFINISHED),
        sqlite_where=text(UNFINISHED),
    ),
    # The admission counts an organization's runs that hold a slot and those that wait ahead of a run: a few at any
    # time, found without reading the organization's other runs (all it ever had).
    Index(
        "ix_runs_org_id_holding_slot", "org_id", postgresql_where=text(HOLDING_SLOT), sqlite_where=text(HOLDING_SLOT)
    ),
    Index(
        "ix_runs_org_id_created_at_id_waiting_for_slot",
        "org_id",
        "created_at",
        "id",
        postgresql_where=text(WAITING_FOR_SLOT),
        sqlite_where=text(WAITING_FOR_SLOT),
    ),
)

run_events = Table(
    "run_events",
    metadata,
    Column("run_id", Uuid, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("org_id", Uuid, nullable=False),
    Column("type", String(32), nullable=False),
    Column("data", Json, nullable=False),
    _timestamp("created_at"),
)

prompt_templates = Table(
    "prompt_templates",
    metadata,
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True),
    Column("name", String(64), primary_key=True),
    Column("description", Text, nullable=False),
    Column("arguments", Json, nullable=False),
    Column("messages", Json, nullable=False),
    Column("agent_id", Uuid, ForeignKey("agents.id", ondelete="SET NULL"), nullable=True),
    _timestamp("created_at"),
    _timestamp("updated_at"),
)

prompt_argument_values = Table(
    "prompt_argument_values",
    metadata,
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True),
    Column("template", String(64), primary_key=True),
    Column("argument", String(64), primary_key=True),
    Column("value", String(500), primary_key=True),
    _timestamp("last_used_at"),
    Index("ix_prompt_argument_values_recent", "org_id", "template", "argument", "last_used_at"),
)

rate_limit_windows = Table(
    "rate_limit_windows",
    metadata,
    Column("key", String(200), primary_key=True),
    Column("window_start", BigInteger, primary_key=True),
    Column("count", Integer, nullable=False),
)

# The usage ledger: one line per model call, written with the run's step. Not tied to the run: usage stays
# accounted when a thread and its runs are deleted.
usage_records = Table(
    "usage_records",
    metadata,
    Column("run_id", Uuid, primary_key=True),
    Column("step", Integer, primary_key=True),
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("agent_id", Uuid, nullable=False),
    Column("model", String(200), nullable=False),
    Column("day", Date, nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cached_tokens", BigInteger, nullable=False),
    Column("tool_calls", Integer, nullable=False),
    Index(None, "org_id", "day"),
)

run_holders = Table(
    "run_holders",
    metadata,
    Column("holder", BigInteger, primary_key=True, autoincrement=False),
    _timestamp("seen_at"),
)
"""Worker mode: when each process that holds runs (runs.holder) was last heard from (persistence/run_holders.py)."""

# Append only: the application never updates or deletes an event.
audit_events = Table(
    "audit_events",
    metadata,
    Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True),
    Column("org_id", Uuid, ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False),
    Column("action", String(64), nullable=False),
    Column("object_type", String(32), nullable=False),
    Column("object_id", String(200), nullable=False),
    Column("actor_key_id", Uuid, nullable=True),
    Column("changes", Json, nullable=False),
    _timestamp("at"),
    Index(None, "org_id", "id"),
    Index(None, "org_id", "object_type", "object_id", "id"),
)
