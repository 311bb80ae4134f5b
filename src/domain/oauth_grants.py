"""OAuth grants of integrations: what an organization's admin authorized an MCP server to be used with.

A grant holds the authorization server's registration of Threadline as a client and the tokens it issued
(both sealed: only the secret box reads them), and at most one pending authorization: the state an admin's
authorize request handed out, single use, bound to the organization, the integration and the admin's key,
and short-lived.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from domain.errors import DomainError
from domain.ids import ApiKeyId, IntegrationId, OrgId

PENDING_AUTHORIZATION_TTL = timedelta(minutes=10)
# Tokens are refreshed this long before they expire, so a request never leaves with one about to lapse.
REFRESH_MARGIN = timedelta(seconds=60)


class AuthorizationNotPending(DomainError):
    """No authorization with this state is waiting: it was never started, already used, or it expired."""


@dataclass(frozen=True, kw_only=True)
class PendingAuthorization:
    state_digest: str
    api_key_id: ApiKeyId
    code_verifier: str = field(repr=False)
    """Sealed."""
    redirect_uri: str
    expires_at: datetime


@dataclass(kw_only=True)
class OAuthGrant:
    org_id: OrgId
    integration_id: IntegrationId
    registration: str | None = field(default=None, repr=False)
    """Sealed: the authorization server's metadata and this client's registration with it."""
    tokens: str | None = field(default=None, repr=False)
    """Sealed: the access token and refresh token."""
    expires_at: datetime | None = None
    pending: PendingAuthorization | None = None
    updated_at: datetime

    def start(self, pending: PendingAuthorization, registration: str, now: datetime) -> None:
        """A new authorization replaces any pending one; tokens already held stay usable until it completes."""
        self.pending = pending
        self.registration = registration
        self.updated_at = now

    def take_pending(self, state_digest: str, now: datetime) -> PendingAuthorization:
        """The pending authorization with this state, used up: a state completes one authorization only."""
        pending = self.pending
        if pending is None or pending.state_digest != state_digest or pending.expires_at <= now:
            raise AuthorizationNotPending("no authorization with this state is pending; start it again")
        self.pending = None
        self.updated_at = now
        return pending

    def authorized(self, tokens: str, expires_at: datetime | None, now: datetime) -> None:
        self.tokens, self.expires_at, self.updated_at = tokens, expires_at, now

    def needs_refresh(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at - REFRESH_MARGIN <= now

    def revoked(self, now: datetime) -> None:
        """The authorization server no longer honours the tokens: an admin must authorize again."""
        self.tokens, self.expires_at, self.updated_at = None, None, now
