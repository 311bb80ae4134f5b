"""On PostgreSQL, a source added or deleted (its thread's or agent's deletion included) is announced to every
process (NOTIFY on `threadline_catalogs`, `source <org id> <source id>`, sent at commit): each tells the
organization's /mcp clients that its resources changed, and those subscribed to the source that it was updated.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FUNCTION = """
CREATE FUNCTION threadline_source_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed record;
BEGIN
    IF TG_OP = 'DELETE' THEN changed := OLD; ELSE changed := NEW; END IF;
    PERFORM pg_notify('threadline_catalogs', 'source ' || changed.org_id::text || ' ' || changed.id::text);
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_FUNCTION)
    op.execute(
        "CREATE TRIGGER threadline_source_changed AFTER INSERT OR DELETE ON sources "
        "FOR EACH ROW EXECUTE FUNCTION threadline_source_changed()"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER threadline_source_changed ON sources")
    op.execute("DROP FUNCTION threadline_source_changed()")
