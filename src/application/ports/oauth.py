"""OAuth 2.1 for integrations: the authorization servers (reached through the outbound guard) and the grants kept."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from application.errors import McpAuthFailed
from domain.ids import IntegrationId, OrgId
from domain.oauth_grants import OAuthGrant


@dataclass(frozen=True, kw_only=True)
class OAuthClientCredentials:
    """A client the admin registered with the authorization server by hand (no dynamic registration)."""

    client_id: str
    client_secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True, kw_only=True)
class OAuthTokens:
    access_token: str = field(repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    expires_in: int | None = None
    scope: str | None = None


@dataclass(frozen=True, kw_only=True)
class AuthorizationRequest:
    """Where to send the admin, and what completing it will need (kept sealed until the callback)."""

    url: str
    code_verifier: str = field(repr=False)
    registration: str = field(repr=False)
    """The discovered metadata and the client's registration, serialized by the adapter (it holds a secret)."""


class OAuthRefused(McpAuthFailed):
    """The authorization server refused, or could not be found (an unknown or revoked grant, a bad code, a
    failed registration, no metadata)."""


class OAuthServers(Protocol):
    """Discovery (protected-resource and authorization-server metadata), registration and token requests."""

    async def authorization_request(
        self,
        *,
        server_url: str,
        redirect_uri: str,
        state: str,
        client: OAuthClientCredentials | None,
        registration: str | None,
    ) -> AuthorizationRequest:
        """Discover the server's authorization server, register with it when no client is given (reusing
        `registration` when it is still for that server), and build the PKCE authorization URL."""
        ...

    async def exchange_code(
        self, *, registration: str, code: str, code_verifier: str, redirect_uri: str
    ) -> OAuthTokens: ...

    async def refresh(self, *, registration: str, refresh_token: str) -> OAuthTokens: ...


class OAuthGrants(Protocol):
    """The stored grants; every method is one short transaction of its own."""

    async def get(self, org_id: OrgId | None, integration_id: IntegrationId) -> OAuthGrant | None:
        """The integration's grant; with no organization, whichever it belongs to (the callback knows none)."""
        ...

    async def save(self, grant: OAuthGrant) -> None: ...
    async def reseal(self, rotate: Callable[[str], str]) -> int:
        """Every sealed value of every grant passed through `rotate` (a new secret key); how many grants."""
        ...

    async def replace_tokens(self, grant: OAuthGrant, *, expected: str | None) -> bool:
        """Store the grant's tokens only when the stored ones are still `expected` (no other process
        refreshed meanwhile); whether it did."""
        ...


class McpAuthorizer(Protocol):
    """The access token for one integration's requests, refreshed before it expires."""

    async def access_token(self, *, refused: str | None = None) -> str:
        """The current access token; `refused` is one the server just refused, which is then replaced.
        Raises McpAuthFailed when no usable token can be had (an admin must authorize again)."""
        ...
