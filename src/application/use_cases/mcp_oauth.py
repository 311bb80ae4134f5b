"""OAuth 2.1 authorization of integrations: an admin starts it, the authorization server's redirect completes
it, and every request of the integration then carries an access token refreshed before it expires."""

import hashlib
import json
import secrets as random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from application.caller import Caller
from application.errors import Conflict, McpAuthFailed, McpIntegrationNotFound
from application.mcp_access import load_integration, oauth_client_of
from application.ports.mcp import McpGateway
from application.ports.oauth import OAuthClientCredentials, OAuthGrants, OAuthRefused, OAuthServers, OAuthTokens
from application.ports.persistence import UnitOfWork
from application.ports.security import SecretBox
from application.ports.system import Clock
from domain.api_keys import Role
from domain.ids import IntegrationId, OrgId
from domain.integrations import AuthType, McpIntegration
from domain.oauth_grants import PENDING_AUTHORIZATION_TTL, AuthorizationNotPending, OAuthGrant, PendingAuthorization


class NotAnOAuthIntegration(Conflict):
    """The integration does not use auth type oauth."""


def authorize_path(integration_id: IntegrationId) -> str:
    return f"/v1/mcp-integrations/{integration_id}/oauth/authorize"


def reauthorize_hint(integration_id: IntegrationId) -> str:
    return f"an admin must authorize the integration again: POST {authorize_path(integration_id)}"


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


def _seal_tokens(secrets: SecretBox, tokens: OAuthTokens, previous_refresh: str | None = None) -> str:
    # A refresh answer may leave the refresh token out: the one held stays valid (RFC 6749 6).
    refresh = tokens.refresh_token or previous_refresh
    return secrets.seal(json.dumps({"access_token": tokens.access_token, "refresh_token": refresh}))


def _open_tokens(secrets: SecretBox, sealed: str) -> tuple[str, str | None]:
    opened = json.loads(secrets.open(sealed))
    return opened["access_token"], opened.get("refresh_token")


def _expiry(tokens: OAuthTokens, now: datetime) -> datetime | None:
    return now + timedelta(seconds=tokens.expires_in) if tokens.expires_in is not None else None


@dataclass(frozen=True, kw_only=True)
class StartMcpAuthorizationCommand:
    caller: Caller
    integration_id: IntegrationId
    redirect_uri: str
    """Where the authorization server sends the admin back: this API's callback route."""


@dataclass(frozen=True, kw_only=True)
class AuthorizationStarted:
    authorize_url: str
    redirect_uri: str
    expires_at: datetime


class StartMcpAuthorization:
    """An admin asks to authorize an oauth integration: the server's authorization server is discovered, a
    client registered with it when the admin entered none, and the PKCE authorization URL handed back."""

    def __init__(
        self, uow: UnitOfWork, grants: OAuthGrants, servers: OAuthServers, secrets: SecretBox, clock: Clock
    ) -> None:
        self._uow, self._grants, self._servers = uow, grants, servers
        self._secrets, self._clock = secrets, clock

    async def execute(self, command: StartMcpAuthorizationCommand) -> AuthorizationStarted:
        caller = command.caller
        caller.require_admin("authorize MCP integrations")
        assert caller.api_key_id is not None, "authorizations are started with an API key"
        async with self._uow.read_only() as uow:
            integration = await load_integration(uow, caller.org_id, command.integration_id)
        if integration.auth_type is not AuthType.OAUTH or integration.url is None:
            raise NotAnOAuthIntegration(f"MCP integration {integration.slug!r} does not use auth type oauth")
        client = None
        if integration.credentials is not None:
            client_id, client_secret = oauth_client_of(self._secrets.open(integration.credentials.ciphertext))
            client = OAuthClientCredentials(client_id=client_id, client_secret=client_secret)
        now = self._clock.now()
        grant = await self._grants.get(caller.org_id, integration.id) or OAuthGrant(
            org_id=caller.org_id, integration_id=integration.id, updated_at=now
        )
        state = random.token_urlsafe(32)
        request = await self._servers.authorization_request(
            server_url=integration.url,
            redirect_uri=command.redirect_uri,
            state=state,
            client=client,
            registration=self._secrets.open(grant.registration) if grant.registration else None,
        )
        expires_at = now + PENDING_AUTHORIZATION_TTL
        pending = PendingAuthorization(
            state_digest=_digest(state),
            api_key_id=caller.api_key_id,
            code_verifier=self._secrets.seal(request.code_verifier),
            redirect_uri=command.redirect_uri,
            expires_at=expires_at,
        )
        grant.start(pending, self._secrets.seal(request.registration), now)
        await self._grants.save(grant)
        return AuthorizationStarted(authorize_url=request.url, redirect_uri=command.redirect_uri, expires_at=expires_at)


@dataclass(frozen=True, kw_only=True)
class CompleteMcpAuthorizationCommand:
    integration_id: IntegrationId
    state: str = field(repr=False)
    code: str | None = field(default=None, repr=False)
    error: str | None = None
    """What the authorization server answered instead of a code (e.g. access_denied)."""
    caller: Caller | None = None
    """The API key that calls back, if any (a browser redirected by the authorization server has none)."""


class CompleteMcpAuthorization:
    """The authorization server's redirect: the state must be the pending one (single use, not expired) of
    this integration, started by an admin key of its organization that is still an active admin key; the
    code is exchanged for tokens, stored sealed."""

    def __init__(
        self,
        uow: UnitOfWork,
        grants: OAuthGrants,
        servers: OAuthServers,
        secrets: SecretBox,
        clock: Clock,
        gateway: McpGateway,
    ) -> None:
        self._uow, self._grants, self._servers = uow, grants, servers
        self._secrets, self._clock, self._gateway = secrets, clock, gateway

    async def execute(self, command: CompleteMcpAuthorizationCommand) -> McpIntegration:
        caller = command.caller
        if caller is not None:
            caller.require_admin("authorize MCP integrations")
        grant = await self._grants.get(caller.org_id if caller else None, command.integration_id)
        if grant is None:
            raise McpIntegrationNotFound(f"MCP integration {command.integration_id} not found")
        now = self._clock.now()
        pending = grant.pending
        if pending is None or (caller is not None and caller.api_key_id != pending.api_key_id):
            raise AuthorizationNotPending("no authorization with this state is pending; start it again")
        async with self._uow.read_only() as uow:
            integration = await load_integration(uow, grant.org_id, command.integration_id)
            key = await uow.api_keys.get(grant.org_id, pending.api_key_id)
        taken = grant.take_pending(_digest(command.state), now)
        await self._grants.save(grant)  # used up, whatever happens next
        if key is None or not key.is_active or key.role is not Role.ADMIN:
            raise AuthorizationNotPending("the API key that started this authorization is no longer an admin key")
        if integration.auth_type is not AuthType.OAUTH or grant.registration is None:
            raise NotAnOAuthIntegration(f"MCP integration {integration.slug!r} does not use auth type oauth")
        if command.error is not None or not command.code:
            raise OAuthRefused(f"the authorization server did not authorize ({(command.error or 'no code')[:100]})")
        tokens = await self._servers.exchange_code(
            registration=self._secrets.open(grant.registration),
            code=command.code,
            code_verifier=self._secrets.open(taken.code_verifier),
            redirect_uri=taken.redirect_uri,
        )
        grant.authorized(_seal_tokens(self._secrets, tokens), _expiry(tokens, now), now)
        await self._grants.save(grant)
        await self._gateway.forget(integration.id)  # a session refused earlier starts afresh
        return integration


class IntegrationTokens:
    """The access token of one oauth integration, refreshed before it expires. Several processes may hold the
    same grant: a refresh is stored only over the tokens it replaced, and a refused refresh first looks
    whether another process refreshed meanwhile."""

    def __init__(
        self,
        grants: OAuthGrants,
        servers: OAuthServers,
        secrets: SecretBox,
        clock: Clock,
        *,
        org_id: OrgId,
        integration_id: IntegrationId,
    ) -> None:
        self._grants, self._servers, self._secrets, self._clock = grants, servers, secrets, clock
        self._org_id, self._integration_id = org_id, integration_id

    def _refused(self, why: str) -> McpAuthFailed:
        return McpAuthFailed(f"{why}; {reauthorize_hint(self._integration_id)}")

    async def access_token(self, *, refused: str | None = None) -> str:
        grant = await self._grants.get(self._org_id, self._integration_id)
        if grant is None or grant.tokens is None or grant.registration is None:
            raise self._refused("the integration is not authorized with its MCP server's authorization server")
        access, refresh = _open_tokens(self._secrets, grant.tokens)
        now = self._clock.now()
        if not grant.needs_refresh(now) and refused != access:
            return access
        if refresh is None:
            raise self._refused("the integration's access token expired and no refresh token was issued")
        try:
            tokens = await self._servers.refresh(
                registration=self._secrets.open(grant.registration), refresh_token=refresh
            )
        except OAuthRefused as refusal:
            current = await self._grants.get(self._org_id, self._integration_id)
            if current is not None and current.tokens is not None and current.tokens != grant.tokens:
                return _open_tokens(self._secrets, current.tokens)[0]  # another process refreshed first
            expected = grant.tokens
            grant.revoked(now)
            await self._grants.replace_tokens(grant, expected=expected)
            raise self._refused(f"refreshing the OAuth token failed: {refusal.detail}") from None
        expected = grant.tokens
        grant.authorized(_seal_tokens(self._secrets, tokens, refresh), _expiry(tokens, now), now)
        if not await self._grants.replace_tokens(grant, expected=expected):
            current = await self._grants.get(self._org_id, self._integration_id)
            if current is not None and current.tokens is not None:
                return _open_tokens(self._secrets, current.tokens)[0]
        return tokens.access_token
