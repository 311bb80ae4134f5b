"""Sources are split into passages for full-text retrieval: `source_passages` keeps each passage with its
location (heading, page, table row); SQLite indexes them in an FTS5 table kept in step by triggers
(porter stemming), PostgreSQL in a `tsvector` column with a GIN index filled by a trigger in the
organization's text search configuration (`organizations.search_language`, 'english' by default). Uploaded
sources keep the hash of their content, so the same file uploaded twice is found.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQLITE_UP = (
    "CREATE VIRTUAL TABLE source_passages_fts USING fts5(heading, text, content='source_passages', "
    "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER source_passages_fts_insert AFTER INSERT ON source_passages BEGIN "
    "INSERT INTO source_passages_fts(rowid, heading, text) VALUES (new.id, new.heading, new.text); END",
    "CREATE TRIGGER source_passages_fts_delete AFTER DELETE ON source_passages BEGIN "
    "INSERT INTO source_passages_fts(source_passages_fts, rowid, heading, text) "
    "VALUES ('delete', old.id, old.heading, old.text); END",
)
_SQLITE_DOWN = (
    "DROP TRIGGER source_passages_fts_delete",
    "DROP TRIGGER source_passages_fts_insert",
    "DROP TABLE source_passages_fts",
)
_POSTGRES_UP = (
    "ALTER TABLE source_passages ADD COLUMN search_vector tsvector",
    """CREATE FUNCTION threadline_passage_vector() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    config regconfig;
BEGIN
    SELECT search_language::regconfig INTO config FROM organizations WHERE id = NEW.org_id;
    NEW.search_vector := setweight(to_tsvector(config, coalesce(NEW.heading, '')), 'A')
        || to_tsvector(config, NEW.text);
    RETURN NEW;
END
$$""",
    "CREATE TRIGGER threadline_passage_vector BEFORE INSERT OR UPDATE ON source_passages "
    "FOR EACH ROW EXECUTE FUNCTION threadline_passage_vector()",
    "CREATE INDEX ix_source_passages_search_vector ON source_passages USING gin (search_vector)",
)
_POSTGRES_DOWN = (
    "DROP INDEX ix_source_passages_search_vector",
    "DROP TRIGGER threadline_passage_vector ON source_passages",
    "DROP FUNCTION threadline_passage_vector()",
    "ALTER TABLE source_passages DROP COLUMN search_vector",
)


def upgrade() -> None:
    op.add_column(
        "organizations", sa.Column("search_language", sa.String(64), nullable=False, server_default="english")
    )
    op.add_column("sources", sa.Column("content_hash", sa.String(64), nullable=True))
    op.create_index("ix_sources_org_id_content_hash", "sources", ["org_id", "content_hash"])
    op.create_table(
        "source_passages",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("source_id", sa.Uuid(), nullable=False),
        sa.Column("thread_id", sa.Uuid(), nullable=True),
        sa.Column("agent_id", sa.Uuid(), nullable=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("heading", sa.Text(), nullable=True),
        sa.Column("page", sa.Integer(), nullable=True),
        sa.Column("table_row", sa.Integer(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_source_passages_org_id_organizations", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["source_id"], ["sources.id"], name="fk_source_passages_source_id_sources", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_source_passages"),
    )
    op.create_index("ix_source_passages_source_id_position", "source_passages", ["source_id", "position"], unique=True)
    op.create_index("ix_source_passages_org_id_thread_id", "source_passages", ["org_id", "thread_id"])
    op.create_index("ix_source_passages_org_id_agent_id", "source_passages", ["org_id", "agent_id"])
    for statement in _POSTGRES_UP if op.get_bind().dialect.name == "postgresql" else _SQLITE_UP:
        op.execute(statement)


def downgrade() -> None:
    for statement in _POSTGRES_DOWN if op.get_bind().dialect.name == "postgresql" else _SQLITE_DOWN:
        op.execute(statement)
    op.drop_index("ix_source_passages_org_id_agent_id", table_name="source_passages")
    op.drop_index("ix_source_passages_org_id_thread_id", table_name="source_passages")
    op.drop_index("ix_source_passages_source_id_position", table_name="source_passages")
    op.drop_table("source_passages")
    op.drop_index("ix_sources_org_id_content_hash", table_name="sources")
    op.drop_column("sources", "content_hash")
    op.drop_column("organizations", "search_language")
