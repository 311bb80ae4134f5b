"""Dense retrieval: `passage_vectors` keeps each passage's embedding per embeddings model (float32, unit
length) and when it was stored (which tells a process whether vectors it keeps in memory are current), or,
until it is embedded, who holds it and until when (`held_until`) and the last failure. A passage
deleted or split again takes its vectors with it. SQLite's full-text index also follows updated passages now
(an AFTER UPDATE trigger; 0011 had insert and delete only).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQLITE_UPDATE_TRIGGER = (
    "CREATE TRIGGER source_passages_fts_update AFTER UPDATE ON source_passages BEGIN "
    "INSERT INTO source_passages_fts(source_passages_fts, rowid, heading, text) "
    "VALUES ('delete', old.id, old.heading, old.text); "
    "INSERT INTO source_passages_fts(rowid, heading, text) VALUES (new.id, new.heading, new.text); END"
)


def upgrade() -> None:
    op.create_table(
        "passage_vectors",
        sa.Column("passage_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("source_id", sa.Uuid(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=True),
        sa.Column("embedded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("held_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["passage_id"],
            ["source_passages.id"],
            name="fk_passage_vectors_passage_id_source_passages",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_passage_vectors_org_id_organizations", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("passage_id", "model", name="pk_passage_vectors"),
    )
    op.create_index("ix_passage_vectors_org_id_model", "passage_vectors", ["org_id", "model"])
    op.create_index("ix_passage_vectors_source_id_model", "passage_vectors", ["source_id", "model"])
    op.create_index("ix_passage_vectors_held_until", "passage_vectors", ["held_until"])
    if op.get_bind().dialect.name == "sqlite":
        op.execute(_SQLITE_UPDATE_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER source_passages_fts_update")
    op.drop_index("ix_passage_vectors_held_until", table_name="passage_vectors")
    op.drop_index("ix_passage_vectors_source_id_model", table_name="passage_vectors")
    op.drop_index("ix_passage_vectors_org_id_model", table_name="passage_vectors")
    op.drop_table("passage_vectors")
