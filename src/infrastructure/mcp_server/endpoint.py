"""The /mcp endpoint: API key authentication in front of the SDK's Streamable HTTP transport."""

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import HTTPConnection
from starlette.types import Receive, Scope, Send

from application.caller import Caller
from application.errors import NotAuthenticated
from domain.errors import DomainError
from infrastructure.http.bearer import API_KEY, api_key
from infrastructure.http.errors import CHALLENGE, domain_error_response, error_response
from infrastructure.mcp_server.host_check import HostCheck
from infrastructure.mcp_server.server import PublishingServer

Authenticate = Callable[[str | None], Awaitable[Caller]]


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers") or []:
        if name == wanted:
            return str(value.decode("latin-1"))
    return None


_OWS = b" \t"


def _trimmed_mcp_headers(scope: Scope) -> None:
    """Drops optional whitespace around the values of `Mcp-*` headers (RFC 9110 5.5: it is not part of the
    value). mcp 2.3.0 compares `Mcp-Name` with the body's name as sent, so a client that adds a space gets
    -32020 HeaderMismatch; the values are trimmed here, before the SDK sees them (to be fixed upstream)."""
    headers = scope.get("headers") or []
    if any(name.startswith(b"mcp-") and value != value.strip(_OWS) for name, value in headers):
        scope["headers"] = [(name, value.strip(_OWS) if name.startswith(b"mcp-") else value) for name, value in headers]


def _principal(caller: Caller) -> AuthenticatedUser:
    """The caller as the SDK's session manager knows who opened a session: a session belongs to the API
    key (of its organization) that opened it, and answers 404 to any other key, of any organization."""
    key = str(caller.api_key_id)
    return AuthenticatedUser(AccessToken(token=key, client_id=key, subject=str(caller.org_id), scopes=[]))


class McpEndpoint:
    """An ASGI app: refuses requests without a valid API key (401 with a Bearer challenge), hands the
    others, with their caller in the request state, to the MCP session manager. A session is bound to
    the key that opened it: a request (POST, GET stream, DELETE) with another key gets 404."""

    def __init__(self, publishing: PublishingServer, authenticate: Authenticate, hosts: HostCheck) -> None:
        self._publishing = publishing
        self._authenticate = authenticate
        self._hosts = hosts
        # Host and Origin are checked here, before authentication; the SDK's own check is off.
        self.manager = StreamableHTTPSessionManager(app=publishing.server)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.manager.run():
            try:
                yield
            finally:
                self._publishing.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        refused = self._hosts.problem(_header(scope, b"host"), _header(scope, b"origin"))
        if refused is not None:
            await error_response(refused[0], "Forbidden", refused[1])(scope, receive, send)
            return
        try:
            caller = await self._authenticate(await api_key(await API_KEY(HTTPConnection(scope))))
        except NotAuthenticated as error:
            challenge = {"WWW-Authenticate": f'{CHALLENGE}, error="invalid_token"'}
            await error_response(401, "NotAuthenticated", error.detail, challenge)(scope, receive, send)
            return
        except DomainError as error:  # the database is unavailable, say
            await domain_error_response(error)(scope, receive, send)
            return
        scope.setdefault("state", {})["caller"] = caller
        scope["user"] = _principal(caller)
        _trimmed_mcp_headers(scope)
        await self.manager.handle_request(scope, receive, send)
