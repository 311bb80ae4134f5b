"""Admin management of MCP integrations, and the connection test."""

from dataclasses import dataclass, field

from application.audit import integration_fields, record_admin_action
from application.caller import Caller
from application.errors import InvalidReference, McpServerError
from application.mcp_access import load_integration, target_of
from application.pagination import Page, PageRequest, decode_id_cursor, page_of
from application.ports.mcp import McpGateway, McpServerInfo, OperatorServers
from application.ports.oauth import OAuthGrants
from application.ports.outbound import OutboundPolicy
from application.ports.persistence import UnitOfWork
from application.ports.security import SecretBox
from application.ports.system import Clock, IdGenerator
from application.slugs import create_with_slug
from domain.audit import REDACTED, AuditAction, FieldChange, changes_between, created, deleted
from domain.errors import InvalidValue
from domain.ids import IntegrationId
from domain.integrations import (
    DEFAULT_TIMEOUT_SECONDS,
    INTEGRATION_SLUG_MAX,
    AuthType,
    IntegrationChanges,
    McpIntegration,
    SealedSecret,
    ToolFilter,
    Transport,
)

CREDENTIALS_MAX = 8_192
# Show the last four characters only of credentials long enough that this reveals little.
_LAST4_MIN_LENGTH = 12


def seal(secrets: SecretBox, plaintext: str) -> SealedSecret:
    if not plaintext or len(plaintext) > CREDENTIALS_MAX:
        raise InvalidValue(f"credentials must be 1-{CREDENTIALS_MAX} characters")
    if any(c in plaintext for c in "\r\n\x00"):
        raise InvalidValue("credentials must not contain line breaks or NUL characters")
    last4 = plaintext[-4:] if len(plaintext) >= _LAST4_MIN_LENGTH else ""
    return SealedSecret(ciphertext=secrets.seal(plaintext), last4=last4)


async def _check_reachability(integration: McpIntegration, outbound: OutboundPolicy, servers: OperatorServers) -> None:
    if integration.transport is Transport.STDIO:
        if integration.server not in servers.names():
            available = ", ".join(servers.names()) or "none are defined"
            raise InvalidReference(f"no operator-defined MCP server named {integration.server!r} ({available})")
    elif integration.url is not None:
        await outbound.check_url(integration.url)


@dataclass(frozen=True, kw_only=True)
class CreateMcpIntegrationCommand:
    caller: Caller
    name: str
    slug: str | None = None
    transport: Transport = Transport.STREAMABLE_HTTP
    url: str | None = None
    server: str | None = None
    auth_type: AuthType = AuthType.NONE
    auth_header_name: str | None = None
    credentials: str | None = field(default=None, repr=False)
    tool_filter: ToolFilter = field(default_factory=ToolFilter)
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    enabled: bool = True


class CreateMcpIntegration:
    def __init__(
        self,
        uow: UnitOfWork,
        clock: Clock,
        ids: IdGenerator,
        secrets: SecretBox,
        outbound: OutboundPolicy,
        servers: OperatorServers,
    ) -> None:
        self._uow, self._clock, self._ids = uow, clock, ids
        self._secrets, self._outbound, self._servers = secrets, outbound, servers

    async def execute(self, command: CreateMcpIntegrationCommand) -> McpIntegration:
        command.caller.require_admin("create MCP integrations")
        return await create_with_slug(
            lambda slug: self._create(command, slug),
            slug=command.slug,
            name=command.name,
            max_length=INTEGRATION_SLUG_MAX,
        )

    async def _create(self, command: CreateMcpIntegrationCommand, slug: str) -> McpIntegration:
        now = self._clock.now()
        integration = McpIntegration(
            id=IntegrationId(self._ids.new()),
            org_id=command.caller.org_id,
            name=command.name,
            slug=slug,
            transport=command.transport,
            url=command.url,
            server=command.server,
            auth_type=command.auth_type,
            auth_header_name=command.auth_header_name,
            credentials=seal(self._secrets, command.credentials) if command.credentials is not None else None,
            tool_filter=command.tool_filter,
            timeout_seconds=command.timeout_seconds,
            enabled=command.enabled,
            created_at=now,
            updated_at=now,
        )
        await _check_reachability(integration, self._outbound, self._servers)
        async with self._uow as uow:
            await uow.integrations.add(integration)
            changes = created(integration_fields(integration))
            await record_admin_action(
                uow, command.caller, AuditAction.INTEGRATION_CREATED, integration.id, changes, at=now
            )
            await uow.commit()
        return integration


class GetMcpIntegration:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, integration_id: IntegrationId) -> McpIntegration:
        async with self._uow.read_only() as uow:
            return await load_integration(uow, caller.org_id, integration_id)


class ListMcpIntegrations:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, page: PageRequest) -> Page[McpIntegration]:
        after = decode_id_cursor(page.cursor)
        async with self._uow.read_only() as uow:
            rows = await uow.integrations.list(
                caller.org_id, limit=page.limit + 1, after=IntegrationId(after) if after else None
            )
        return page_of(rows, page.limit, key=lambda i: str(i.id))


@dataclass(frozen=True, kw_only=True)
class UpdateMcpIntegrationCommand:
    caller: Caller
    integration_id: IntegrationId
    changes: IntegrationChanges
    credentials: str | None = field(default=None, repr=False)
    """New plaintext credentials, sealed by the use case."""


class UpdateMcpIntegration:
    """Changes an integration (enabling and disabling included); its pooled session is dropped."""

    def __init__(
        self,
        uow: UnitOfWork,
        clock: Clock,
        secrets: SecretBox,
        outbound: OutboundPolicy,
        servers: OperatorServers,
        gateway: McpGateway,
    ) -> None:
        self._uow, self._clock, self._secrets = uow, clock, secrets
        self._outbound, self._servers, self._gateway = outbound, servers, gateway

    async def execute(self, command: UpdateMcpIntegrationCommand) -> McpIntegration:
        command.caller.require_admin("change MCP integrations")
        changes = command.changes
        if command.credentials is not None:
            changes = IntegrationChanges(
                **{**changes.__dict__, "credentials": seal(self._secrets, command.credentials)}
            )
        async with self._uow as uow:
            integration = await load_integration(uow, command.caller.org_id, command.integration_id)
            before = (integration.transport, integration.url, integration.server)
            fields_before, now = integration_fields(integration), self._clock.now()
            integration.apply(changes, now)
            if (integration.transport, integration.url, integration.server) != before:
                await _check_reachability(integration, self._outbound, self._servers)
            await uow.integrations.save(integration)
            action, audited = _update_event(fields_before, integration_fields(integration), changes)
            await record_admin_action(uow, command.caller, action, integration.id, audited, at=now)
            await uow.commit()
        await self._gateway.forget(integration.id)
        return integration


def _update_event(
    before: dict[str, object], after: dict[str, object], changes: IntegrationChanges
) -> tuple[AuditAction, tuple[FieldChange, ...]]:
    """What a change of an integration is called in the audit log, and its fields."""
    audited = changes_between(before, after)
    if changes.credentials is not None and not any(c.field == "credentials" for c in audited):
        # Replaced by another secret: the value is never shown, but that it changed is.
        audited = (*audited, FieldChange(field="credentials", old=REDACTED, new=REDACTED))
    fields = {c.field for c in audited}
    if fields == {"enabled"} or (not fields and changes.enabled is not None):  # enabling an enabled one too
        return (AuditAction.INTEGRATION_ENABLED if after["enabled"] else AuditAction.INTEGRATION_DISABLED), audited
    if fields == {"credentials"}:
        return AuditAction.INTEGRATION_CREDENTIALS_CHANGED, audited
    return AuditAction.INTEGRATION_UPDATED, audited


def _status_fields(integration: McpIntegration) -> dict[str, object]:
    return {"connection_status": integration.connection_status.value, "last_error": integration.last_error}


class DeleteMcpIntegration:
    """Deletes an integration; agents stop using it and its pooled session is closed."""

    def __init__(self, uow: UnitOfWork, clock: Clock, gateway: McpGateway) -> None:
        self._uow, self._clock, self._gateway = uow, clock, gateway

    async def execute(self, caller: Caller, integration_id: IntegrationId) -> None:
        caller.require_admin("delete MCP integrations")
        async with self._uow as uow:
            integration = await load_integration(uow, caller.org_id, integration_id)
            now = self._clock.now()
            for agent in await uow.agents.using_integration(caller.org_id, integration_id):
                if agent.forget_integration(integration_id, now):
                    await uow.agents.save(agent)
            await uow.integrations.delete(caller.org_id, integration_id)
            changes = deleted(integration_fields(integration))
            await record_admin_action(uow, caller, AuditAction.INTEGRATION_DELETED, integration_id, changes, at=now)
            await uow.commit()
        await self._gateway.forget(integration_id)


@dataclass(frozen=True, kw_only=True)
class ConnectionTest:
    integration: McpIntegration
    server: McpServerInfo | None
    error: McpServerError | None


class TestMcpIntegration:
    """Connects to the server afresh, describes it, and records the outcome on the integration: an admin's
    action, like every other change of an integration (it connects out and writes the integration's status)."""

    __test__ = False  # not a pytest test class

    def __init__(self, uow: UnitOfWork, clock: Clock, secrets: SecretBox, gateway: McpGateway) -> None:
        self._uow, self._clock, self._secrets, self._gateway = uow, clock, secrets, gateway

    async def execute(self, caller: Caller, integration_id: IntegrationId) -> ConnectionTest:
        caller.require_admin("test MCP integrations")
        async with self._uow.read_only() as uow:
            integration = await load_integration(uow, caller.org_id, integration_id)
        server: McpServerInfo | None = None
        error: McpServerError | None = None
        try:
            server = await self._gateway.probe(target_of(integration, self._secrets))
        except McpServerError as failure:
            error = failure
        async with self._uow as uow:
            current = await load_integration(uow, caller.org_id, integration_id)
            now = self._clock.now()
            status_before = _status_fields(current)
            if current.updated_at == integration.updated_at:  # not changed meanwhile
                current.record_check(now, error.detail if error else None)
                await uow.integrations.save(current)
            changes = changes_between(status_before, _status_fields(current))
            await record_admin_action(uow, caller, AuditAction.INTEGRATION_TESTED, integration_id, changes, at=now)
            await uow.commit()
        return ConnectionTest(integration=current, server=server, error=error)


class RotateCredentialEncryption:
    """Re-encrypts every stored credential with the current secret key (the operator's command), the OAuth
    grants' tokens and registrations included."""

    def __init__(self, uow: UnitOfWork, secrets: SecretBox, grants: OAuthGrants | None = None) -> None:
        self._uow, self._secrets, self._grants = uow, secrets, grants

    async def execute(self) -> int:
        async with self._uow as uow:
            sealed = await uow.integrations.all_sealed_credentials()
            for org_id, integration_id, ciphertext in sealed:
                await uow.integrations.replace_ciphertext(org_id, integration_id, self._secrets.rotate(ciphertext))
            await uow.commit()
        grants = await self._grants.reseal(self._secrets.rotate) if self._grants is not None else 0
        return len(sealed) + grants
