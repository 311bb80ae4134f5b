"""How every MCP operation reaches an integration: it must be the caller's and enabled."""

from application.errors import McpIntegrationDisabled, McpIntegrationNotFound
from application.ports.mcp import McpTarget
from application.ports.persistence import UnitOfWork
from application.ports.security import SecretBox
from domain.ids import IntegrationId, OrgId
from domain.integrations import AuthType, McpIntegration


async def load_integration(uow: UnitOfWork, org_id: OrgId, integration_id: IntegrationId) -> McpIntegration:
    integration = await uow.integrations.get(org_id, integration_id)
    if integration is None:
        raise McpIntegrationNotFound(f"MCP integration {integration_id} not found")
    return integration


async def load_enabled_integration(uow: UnitOfWork, org_id: OrgId, integration_id: IntegrationId) -> McpIntegration:
    integration = await load_integration(uow, org_id, integration_id)
    if not integration.enabled:
        raise McpIntegrationDisabled(f"MCP integration {integration.slug!r} is disabled")
    return integration


def target_of(integration: McpIntegration, secrets: SecretBox) -> McpTarget:
    """The connection details of an integration, with its credentials decrypted for this call only."""
    headers: dict[str, str] = {}
    oauth_client: tuple[str, str | None] | None = None
    if integration.credentials is not None:
        secret = secrets.open(integration.credentials.ciphertext)
        if integration.auth_type is AuthType.BEARER:
            headers["Authorization"] = f"Bearer {secret}"
        elif integration.auth_type is AuthType.HEADER and integration.auth_header_name:
            headers[integration.auth_header_name] = secret
        elif integration.auth_type in (AuthType.OAUTH, AuthType.CLIENT_CREDENTIALS):
            oauth_client = oauth_client_of(secret)
    return McpTarget(
        integration_id=integration.id,
        org_id=integration.org_id,
        transport=integration.transport,
        version=integration.updated_at,
        url=integration.url,
        server=integration.server,
        headers=headers,
        timeout_seconds=integration.timeout_seconds,
        auth_type=integration.auth_type,
        oauth_client=oauth_client,
    )


def oauth_client_of(credentials: str) -> tuple[str, str | None]:
    """An OAuth client as the admin entered it: `client_id:client_secret`, or `client_id` for a public client."""
    client_id, _, client_secret = credentials.partition(":")
    return client_id, client_secret or None
