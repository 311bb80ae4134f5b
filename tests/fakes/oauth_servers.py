"""An OAuth 2.1 authorization server and an MCP server it protects, built with the `mcp` SDK's auth support and
served on 127.0.0.1 in this process.

The authorization server approves every authorization request at once (it redirects straight back with a
code), registers clients dynamically unless told not to, also grants client credentials, and lets a test
expire every access token or revoke every grant. The MCP server accepts only its access tokens.
"""

import collections
import contextlib
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    IdentityAssertionParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl, AnyUrl
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.fakes.loopback import LoopbackServer

SCOPE = "mcp"


class AutoApprovingProvider:
    """The SDK's authorization server provider protocol, in memory, approving everything asked."""

    def __init__(self, *, expires_in: int) -> None:
        self.expires_in = expires_in
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.grants: collections.Counter[str] = collections.Counter()
        """Tokens issued, by grant type."""

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    def issue(
        self, client_id: str, scopes: list[str], resource: str | None, *, refresh: bool, grant: str
    ) -> OAuthToken:
        self.grants[grant] += 1
        access = secrets.token_urlsafe(24)
        expires_at = int(time.time()) + self.expires_in
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires_at, resource=resource
        )
        refresh_token = None
        if refresh:
            refresh_token = secrets.token_urlsafe(24)
            self.refresh[refresh_token] = RefreshToken(
                token=refresh_token, client_id=client_id, scopes=scopes, resource=resource
            )
        return OAuthToken(
            access_token=access,
            expires_in=self.expires_in,
            scope=" ".join(scopes),
            refresh_token=refresh_token,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        return self.issue(
            authorization_code.client_id,
            authorization_code.scopes,
            authorization_code.resource,
            refresh=True,
            grant="authorization_code",
        )

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if self.refresh.pop(refresh_token.token, None) is None:
            raise TokenError(error="invalid_grant", error_description="refresh token revoked")
        return self.issue(
            refresh_token.client_id,
            scopes or refresh_token.scopes,
            refresh_token.resource,
            refresh=True,
            grant="refresh_token",
        )

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at <= time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: IdentityAssertionParams
    ) -> OAuthToken:
        raise TokenError(error="unsupported_grant_type", error_description="not offered")


class _ClientCredentialsGrant:
    """The token endpoint, also granting client credentials (the SDK's handler leaves that grant out)."""

    def __init__(self, provider: AutoApprovingProvider, sdk_endpoint: ASGIApp) -> None:
        self._provider, self._sdk = provider, sdk_endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if form.get("grant_type") != "client_credentials":
            replayed = False

            async def replay() -> dict[str, Any]:
                nonlocal replayed
                if replayed:
                    return dict(await receive())
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}

            await self._sdk(scope, replay, send)
            return
        client = self._provider.clients.get(form.get("client_id", ""))
        if client is None or client.client_secret != form.get("client_secret"):
            await JSONResponse({"error": "invalid_client"}, status_code=401)(scope, receive, send)
            return
        token = self._provider.issue(
            client.client_id or "", [SCOPE], form.get("resource"), refresh=False, grant="client_credentials"
        )
        await JSONResponse(token.model_dump(exclude_none=True))(scope, receive, send)


class _Late:
    """An ASGI app set once the URL it is served at is known."""

    app: ASGIApp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


class OAuthProtectedMcp:
    """`async with OAuthProtectedMcp() as servers:` then an integration with `servers.mcp_url`.

    `registration=False`: the authorization server offers no dynamic registration; `client_id` and
    `client_secret` are then a client registered with it beforehand (for the authorization code and for
    client credentials)."""

    client_id = "threadline-machine"
    client_secret = "machine-secret-0123456789"

    def __init__(self, *, registration: bool = True, expires_in: int = 3_600) -> None:
        self.provider = AutoApprovingProvider(expires_in=expires_in)
        self._registration = registration
        self._as_app, self._mcp_app = _Late(), _Late()
        self._as = LoopbackServer(self._as_app)
        self._mcp = LoopbackServer(self._mcp_app)
        self.issuer = self._as.base_url
        self.mcp_url = f"{self._mcp.base_url}/mcp"
        self.tool_calls = 0
        self.refused = 0
        """Requests the MCP server refused for an unknown or expired token."""
        self._stack = contextlib.AsyncExitStack()

    def register(self, redirect_uri: str | None = None) -> None:
        """The client an admin registered by hand (redirect URI included, for the authorization code)."""
        self.provider.clients[self.client_id] = OAuthClientInformationFull(
            client_id=self.client_id,
            client_secret=self.client_secret,
            redirect_uris=[AnyUrl(redirect_uri)] if redirect_uri else None,
            grant_types=["authorization_code", "refresh_token", "client_credentials"],
            token_endpoint_auth_method="client_secret_post",
            scope=SCOPE,
        )

    def expire_access_tokens(self) -> None:
        for token in self.provider.access.values():
            token.expires_at = int(time.time()) - 1

    def revoke_grants(self) -> None:
        self.provider.access.clear()
        self.provider.refresh.clear()

    def _authorization_server(self) -> Starlette:
        routes = create_auth_routes(
            self.provider,
            AnyHttpUrl(self.issuer),
            client_registration_options=ClientRegistrationOptions(
                enabled=self._registration, valid_scopes=[SCOPE], default_scopes=[SCOPE]
            ),
            revocation_options=RevocationOptions(enabled=True),
        )
        routes = [
            Route(r.path, _ClientCredentialsGrant(self.provider, r.app), methods=["POST", "OPTIONS"])
            if r.path == "/token"
            else r
            for r in routes
        ]
        return Starlette(routes=routes)

    def _protected_mcp(self) -> ASGIApp:
        server = MCPServer(
            name="protected-mcp",
            version="1.0.0",
            auth_server_provider=None,
            token_verifier=_Verifier(self),
            auth=AuthSettings(
                issuer_url=AnyHttpUrl(self.issuer),
                resource_server_url=AnyHttpUrl(self.mcp_url),
                required_scopes=[SCOPE],
                validate_token_resource=True,
            ),
        )

        @server.tool()
        def whoami() -> str:
            """Says who the caller is"""
            self.tool_calls += 1
            return "an authorized client"

        @server.tool()
        def echo(message: str) -> str:
            """Echoes a message"""
            return message

        return server.streamable_http_app()

    async def __aenter__(self) -> "OAuthProtectedMcp":
        self._as_app.app = self._authorization_server()
        self._mcp_app.app = self._protected_mcp()
        await self._stack.enter_async_context(self._as)
        await self._stack.enter_async_context(self._mcp)
        return self

    async def __aexit__(self, *exc: object) -> None:
        # Sessions a pooled client keeps open (a listening stream) must not hold up the servers' shutdown.
        for server in (self._mcp, self._as):
            server._server.force_exit = True
        await self._stack.aclose()


class _Verifier:
    def __init__(self, servers: "OAuthProtectedMcp") -> None:
        self._servers = servers

    async def verify_token(self, token: str) -> AccessToken | None:
        found = await self._servers.provider.load_access_token(token)
        if found is None:
            self._servers.refused += 1
        return found


@contextlib.asynccontextmanager
async def oauth_protected_mcp(**options: Any) -> AsyncIterator[OAuthProtectedMcp]:
    async with OAuthProtectedMcp(**options) as servers:
        yield servers
