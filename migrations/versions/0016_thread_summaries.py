"""Summaries of threads' oldest messages: an agent that summarizes what its requests leave out keeps the summary
with the thread (`covers_upto`: the messages numbered below it are summarized), so later runs extend it instead
of summarizing the thread again.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "thread_summaries",
        sa.Column("thread_id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("covers_upto", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["thread_id"], ["threads.id"], name="fk_thread_summaries_thread_id_threads", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_thread_summaries_org_id_organizations", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("thread_id", name="pk_thread_summaries"),
    )


def downgrade() -> None:
    op.drop_table("thread_summaries")
