"""OAuth 2.1 for integrations: auth types `oauth` and `client_credentials` (a longer auth_type column), and
each oauth integration's grant: the authorization server's registration of Threadline, the tokens (both
sealed) with their expiry, and at most one pending authorization (a digest of its state, the admin key that
started it, the sealed PKCE verifier, the callback and an expiry).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# PostgreSQL cannot change the type of a column a trigger names: 0010's trigger is set aside meanwhile.
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
_TRIGGER = (
    "CREATE TRIGGER threadline_integration_changed AFTER UPDATE ON mcp_integrations FOR EACH ROW WHEN ("
    + " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in _CONNECTION)
    + ") EXECUTE FUNCTION threadline_catalog_changed()"
)


def _auth_type_length(before: int, after: int) -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    if postgresql:
        op.execute("DROP TRIGGER threadline_integration_changed ON mcp_integrations")
    with op.batch_alter_table("mcp_integrations") as batch:
        batch.alter_column(
            "auth_type", existing_type=sa.String(before), type_=sa.String(after), existing_nullable=False
        )
    if postgresql:
        op.execute(_TRIGGER)


def upgrade() -> None:
    _auth_type_length(16, 32)
    op.create_table(
        "mcp_oauth_grants",
        sa.Column("integration_id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("registration_ciphertext", sa.Text(), nullable=True),
        sa.Column("tokens_ciphertext", sa.Text(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pending_state_digest", sa.String(64), nullable=True),
        sa.Column("pending_api_key_id", sa.Uuid(), nullable=True),
        sa.Column("pending_verifier_ciphertext", sa.Text(), nullable=True),
        sa.Column("pending_redirect_uri", sa.String(2048), nullable=True),
        sa.Column("pending_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["integration_id"],
            ["mcp_integrations.id"],
            name=op.f("fk_mcp_oauth_grants_integration_id_mcp_integrations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_mcp_oauth_grants_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("integration_id", name=op.f("pk_mcp_oauth_grants")),
    )


def downgrade() -> None:
    op.drop_table("mcp_oauth_grants")
    # A release that does not know the OAuth auth types keeps such integrations, disabled and without auth.
    integrations = sa.table(
        "mcp_integrations",
        sa.column("auth_type", sa.String),
        sa.column("credentials_ciphertext", sa.Text),
        sa.column("credentials_last4", sa.String),
        sa.column("enabled", sa.Boolean),
    )
    op.execute(
        integrations.update()
        .where(integrations.c.auth_type.in_(["oauth", "client_credentials"]))
        .values(auth_type="none", credentials_ciphertext=None, credentials_last4=None, enabled=False)
    )
    _auth_type_length(32, 16)
