"""MCP integrations: an organization's connection to one MCP server, managed by its admins."""

import re
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from enum import StrEnum

from domain.errors import InvalidValue
from domain.ids import IntegrationId, OrgId
from domain.text import require_slug, require_text

INTEGRATION_NAME_MAX = 200
# The slug prefixes tool names (`<slug>__<tool>`, at most 64 characters), so it stays short.
INTEGRATION_SLUG_MAX = 32
URL_MAX = 2_048
FILTER_NAMES_MAX = 256
TIMEOUT_MIN_SECONDS = 1
TIMEOUT_MAX_SECONDS = 600
DEFAULT_TIMEOUT_SECONDS = 30
LAST_ERROR_MAX = 1_000
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
_FORBIDDEN_HEADERS = frozenset({"host", "content-length", "content-type", "connection", "transfer-encoding"})


class Transport(StrEnum):
    """How the MCP server is reached."""

    STREAMABLE_HTTP = "streamable_http"
    SSE = "sse"
    STDIO = "stdio"


class AuthType(StrEnum):
    """How the integration's credential is sent."""

    NONE = "none"
    BEARER = "bearer"
    HEADER = "header"
    OAUTH = "oauth"
    """OAuth 2.1 authorization code with PKCE: an admin authorizes once; `credentials`, when set, is the
    client id (`client_id` or `client_id:client_secret`) the admin registered, else the client registers itself."""
    CLIENT_CREDENTIALS = "client_credentials"
    """OAuth 2.1 client credentials (machine to machine): `credentials` is `client_id:client_secret`."""


class FilterMode(StrEnum):
    """How an integration's tool filter applies its names."""

    ALL = "all"
    INCLUDE = "include"
    EXCLUDE = "exclude"


class ConnectionStatus(StrEnum):
    """Outcome of the last connection to the server."""

    UNKNOWN = "unknown"
    CONNECTED = "connected"
    FAILED = "failed"


@dataclass(frozen=True, kw_only=True)
class ToolFilter:
    """Which of the server's tools the organization uses: all, only some, or all but some."""

    mode: FilterMode = FilterMode.ALL
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode is FilterMode.ALL and self.names:
            raise InvalidValue("tool_filter: names are only allowed with mode include or exclude")
        if len(self.names) > FILTER_NAMES_MAX:
            raise InvalidValue(f"tool_filter may list at most {FILTER_NAMES_MAX} names")
        if any(not isinstance(n, str) or not n or len(n) > 128 for n in self.names):
            raise InvalidValue("tool_filter names must be 1-128 characters")

    def allows(self, tool_name: str) -> bool:
        if self.mode is FilterMode.INCLUDE:
            return tool_name in self.names
        if self.mode is FilterMode.EXCLUDE:
            return tool_name not in self.names
        return True


@dataclass(frozen=True, kw_only=True)
class SealedSecret:
    """A credential encrypted at rest; only its last four characters are ever shown."""

    ciphertext: str = field(repr=False)
    last4: str


@dataclass(frozen=True, kw_only=True)
class IntegrationChanges:
    """A partial update: fields left None stay as they are. `credentials` is sealed already;
    `clear_credentials` removes the stored one."""

    name: str | None = None
    slug: str | None = None
    url: str | None = None
    server: str | None = None
    transport: Transport | None = None
    auth_type: AuthType | None = None
    auth_header_name: str | None = None
    credentials: SealedSecret | None = None
    clear_credentials: bool = False
    tool_filter: ToolFilter | None = None
    timeout_seconds: int | None = None
    enabled: bool | None = None


@dataclass(kw_only=True)
class McpIntegration:
    id: IntegrationId
    org_id: OrgId
    name: str
    slug: str
    created_at: datetime
    updated_at: datetime
    transport: Transport = Transport.STREAMABLE_HTTP
    url: str | None = None
    server: str | None = None
    """For stdio: the name of a server the operator defined. Tenants never supply commands."""
    auth_type: AuthType = AuthType.NONE
    auth_header_name: str | None = None
    credentials: SealedSecret | None = None
    tool_filter: ToolFilter = field(default_factory=ToolFilter)
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    enabled: bool = True
    connection_status: ConnectionStatus = ConnectionStatus.UNKNOWN
    last_error: str | None = None
    last_checked_at: datetime | None = None

    def __post_init__(self) -> None:
        require_text("name", self.name, max_length=INTEGRATION_NAME_MAX)
        require_slug("slug", self.slug, max_length=INTEGRATION_SLUG_MAX)
        if self.transport is Transport.STDIO:
            if not self.server:
                raise InvalidValue("a stdio integration needs `server`: the name of an operator-defined server")
            if self.url is not None:
                raise InvalidValue("a stdio integration takes `server`, not `url`")
            if self.auth_type is not AuthType.NONE:
                raise InvalidValue("a stdio integration takes no auth; the operator's server definition sets its env")
        else:
            if not self.url:
                raise InvalidValue(f"a {self.transport.value} integration needs `url`")
            if self.server is not None:
                raise InvalidValue(f"a {self.transport.value} integration takes `url`, not `server`")
            if len(self.url) > URL_MAX or not self.url.startswith(("http://", "https://")):
                raise InvalidValue(f"url must be an http(s) URL of at most {URL_MAX} characters")
        if self.auth_type is AuthType.HEADER:
            name = self.auth_header_name or ""
            if not _HEADER_NAME.match(name) or name.lower() in _FORBIDDEN_HEADERS:
                raise InvalidValue("auth type header needs `auth_header_name`, a valid HTTP header name")
        elif self.auth_header_name is not None:
            raise InvalidValue("auth_header_name is only used with auth type header")
        if self.auth_type not in (AuthType.NONE, AuthType.OAUTH) and self.credentials is None:
            raise InvalidValue(f"auth type {self.auth_type.value} needs `credentials`")
        if self.auth_type is AuthType.NONE and self.credentials is not None:
            raise InvalidValue("credentials need an auth type (bearer, header, oauth or client_credentials)")
        if isinstance(self.timeout_seconds, bool) or not (
            TIMEOUT_MIN_SECONDS <= self.timeout_seconds <= TIMEOUT_MAX_SECONDS
        ):
            raise InvalidValue(f"timeout_seconds must be between {TIMEOUT_MIN_SECONDS} and {TIMEOUT_MAX_SECONDS}")

    @property
    def tool_prefix(self) -> str:
        """How this integration's tools are named for the model: `<slug>__<tool>`."""
        return f"{self.slug}__"

    def apply(self, changes: IntegrationChanges, now: datetime) -> None:
        """Apply a partial update; on a broken rule nothing changes. Connection state is reset."""
        updates = {
            f.name: getattr(changes, f.name)
            for f in fields(changes)
            if f.name != "clear_credentials" and getattr(changes, f.name) is not None
        }
        if changes.clear_credentials:
            updates["credentials"] = None
        if updates.get("transport") is Transport.STDIO:
            updates.setdefault("url", None)
        elif "transport" in updates:
            updates.setdefault("server", None)
        if updates.get("auth_type") not in (None, AuthType.HEADER):
            updates.setdefault("auth_header_name", None)
        if updates.get("auth_type") is AuthType.NONE:
            updates.setdefault("credentials", None)
        candidate = replace(
            self,
            **updates,
            updated_at=now,
            connection_status=ConnectionStatus.UNKNOWN,
            last_error=None,
            last_checked_at=None,
        )
        for f in fields(self):
            setattr(self, f.name, getattr(candidate, f.name))

    def record_check(self, now: datetime, error: str | None) -> None:
        self.last_checked_at = now
        self.connection_status = ConnectionStatus.FAILED if error else ConnectionStatus.CONNECTED
        self.last_error = error[:LAST_ERROR_MAX] if error else None
