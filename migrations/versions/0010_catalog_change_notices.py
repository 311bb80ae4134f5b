"""On PostgreSQL, changes that matter to MCP catalogs are announced to every process of the deployment
(NOTIFY on `threadline_catalogs`, sent at commit): an integration's connection settings changed or it was
deleted (`integration <id>`: each process drops its session and cached catalogs), or an organization's
published tools and prompts changed, a prompt template or a published agent (`published <org id>`: each process
tells its /mcp clients). SQLite databases serve one process, which needs no notices.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FUNCTION = """
CREATE FUNCTION threadline_catalog_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed record;
BEGIN
    IF TG_OP = 'DELETE' THEN changed := OLD; ELSE changed := NEW; END IF;
    IF TG_TABLE_NAME = 'mcp_integrations' THEN
        PERFORM pg_notify('threadline_catalogs', 'integration ' || changed.id::text);
    ELSE
        PERFORM pg_notify('threadline_catalogs', 'published ' || changed.org_id::text);
    END IF;
    RETURN NULL;
END
$$
"""
_CONNECTION = (
    "transport",
    "url",
    "server",
    "auth_type",
    "auth_header_name",
    "credentials_ciphertext",
    "tool_filter_mode",
    "tool_filter_names",
    "timeout_seconds",
    "enabled",
)
_TRIGGERS = {
    "threadline_integration_changed": "AFTER UPDATE ON mcp_integrations FOR EACH ROW WHEN ("
    + " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in _CONNECTION)
    + ")",
    "threadline_integration_deleted": "AFTER DELETE ON mcp_integrations FOR EACH ROW",
    "threadline_templates_changed": "AFTER INSERT OR UPDATE OR DELETE ON prompt_templates FOR EACH ROW",
    "threadline_published_agent_added": "AFTER INSERT ON agents FOR EACH ROW WHEN (NEW.publish_as_mcp)",
    "threadline_published_agent_changed": "AFTER UPDATE ON agents FOR EACH ROW "
    "WHEN (OLD.publish_as_mcp OR NEW.publish_as_mcp)",
    "threadline_published_agent_deleted": "AFTER DELETE ON agents FOR EACH ROW WHEN (OLD.publish_as_mcp)",
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_FUNCTION)
    for name, when in _TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {when} EXECUTE FUNCTION threadline_catalog_changed()")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, when in _TRIGGERS.items():
        table = when.split(" ON ", 1)[1].split(" ", 1)[0]
        op.execute(f"DROP TRIGGER {name} ON {table}")
    op.execute("DROP FUNCTION threadline_catalog_changed()")
