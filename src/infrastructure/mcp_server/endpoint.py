"""The /mcp endpoint: API key authentication in front of the SDK's Streamable HTTP transport."""

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Receive, Scope, Send

from application.caller import Caller
from application.errors import NotAuthenticated
from infrastructure.mcp_server.host_check import HostCheck
from infrastructure.mcp_server.server import PublishingServer

Authenticate = Callable[[str | None], Awaitable[Caller]]


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers") or []:
        if name == wanted:
            return str(value.decode("latin-1"))
    return None


def _bearer(scope: Scope) -> str | None:
    scheme, _, token = (_header(scope, b"authorization") or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class McpEndpoint:
    """An ASGI app: refuses requests without a valid API key (401 with a Bearer challenge), hands the
    others, with their caller in the request state, to the MCP session manager."""

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
            await self._send(send, refused[0], "Forbidden", refused[1])
            return
        try:
            caller = await self._authenticate(_bearer(scope))
        except NotAuthenticated as error:
            await self._refuse(send, error.detail)
            return
        scope.setdefault("state", {})["caller"] = caller
        await self.manager.handle_request(scope, receive, send)

    async def _refuse(self, send: Send, detail: str) -> None:
        await self._send(
            send,
            401,
            "NotAuthenticated",
            detail,
            [(b"www-authenticate", b'Bearer realm="threadline", error="invalid_token"')],
        )

    @staticmethod
    async def _send(
        send: Send, status: int, error: str, detail: str, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        body = json.dumps({"error": error, "detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *(headers or []),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
