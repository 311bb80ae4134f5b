"""OAuth 2.1 towards integrations' MCP servers, built on the `mcp` SDK's client auth.

Authorization code with PKCE is split over two HTTP requests of ours (an admin starts it, the authorization
server's redirect completes it, perhaps in another process), so the SDK's interactive `OAuthClientProvider`
flow does not fit as a whole; its pieces do: discovery URLs and metadata parsing (RFC 9728, RFC 8414),
scope selection, dynamic client registration (RFC 7591) and its checks, PKCE and token-endpoint client
authentication. Client credentials is the SDK's `ClientCredentialsOAuthProvider` as it is. Every request
goes through the outbound guard, and no token or secret is logged.
"""

import asyncio
import json
import logging
import warnings
from collections.abc import AsyncGenerator, Callable
from urllib.parse import urlencode

import httpx2
from mcp.client.auth import OAuthRegistrationError, PKCEParameters
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.oauth2 import OAuthContext, check_registration_usable
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_client_registration_request,
    create_oauth_metadata_request,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
    get_client_metadata_scopes,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    handle_registration_response,
    issuers_match,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthMetadata, OAuthToken
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url
from pydantic import ValidationError

from application.errors import McpAuthFailed
from application.ports.mcp import McpTarget
from application.ports.oauth import (
    AuthorizationRequest,
    McpAuthorizer,
    OAuthClientCredentials,
    OAuthRefused,
    OAuthTokens,
)
from domain.integrations import AuthType
from infrastructure.outbound.guard import NetworkPolicy
from infrastructure.outbound.transport import guarded_httpx2_transport

logger = logging.getLogger(__name__)
CLIENT_NAME = "Threadline"
_GRANT_TYPES = ["authorization_code", "refresh_token"]
_ERROR_CODE_MAX = 100


def _error_code(response: httpx2.Response) -> str:
    """The OAuth error code of a refusal (RFC 6749 5.2), never the rest of the body."""
    try:
        code = response.json().get("error")
    except (ValueError, AttributeError):
        code = None
    return str(code)[:_ERROR_CODE_MAX] if code else f"HTTP {response.status_code}"


class SdkOAuthServers:
    """The authorization servers of integrations, reached through the outbound guard."""

    def __init__(self, outbound: NetworkPolicy, *, timeout_seconds: float = 30) -> None:
        self._outbound, self._timeout = outbound, timeout_seconds

    def _client(self) -> httpx2.AsyncClient:
        # Redirects are not followed: each metadata location is tried in turn instead (as the SDK does).
        transport = guarded_httpx2_transport(self._outbound, ssl_context=httpx2.create_ssl_context())
        return httpx2.AsyncClient(transport=transport, timeout=self._timeout, trust_env=False)

    async def _send(self, client: httpx2.AsyncClient, request: httpx2.Request) -> httpx2.Response:
        await self._outbound.check_url(str(request.url))
        try:
            return await client.send(request)
        except httpx2.HTTPError as error:
            raise OAuthRefused(f"cannot reach {request.url.host}: {type(error).__name__}") from None

    async def authorization_request(
        self,
        *,
        server_url: str,
        redirect_uri: str,
        state: str,
        client: OAuthClientCredentials | None,
        registration: str | None,
    ) -> AuthorizationRequest:
        async with self._client() as http:
            # An unauthenticated request tells where the resource's metadata is and which scope it wants.
            challenge = await self._send(
                http, httpx2.Request("GET", server_url, headers={"Accept": "application/json, text/event-stream"})
            )
            await challenge.aread()
            resource_metadata_url = extract_resource_metadata_from_www_auth(challenge)
            challenged_scope = extract_scope_from_www_auth(challenge) if challenge.status_code == 401 else None
            protected = None
            for url in build_protected_resource_metadata_discovery_urls(resource_metadata_url, server_url):
                protected = await handle_protected_resource_response(
                    await self._send(http, create_oauth_metadata_request(url))
                )
                if protected is not None:
                    break
            resource = resource_url_from_server_url(server_url)
            if protected is not None and protected.resource:
                if not check_resource_allowed(requested_resource=resource, configured_resource=str(protected.resource)):
                    raise OAuthRefused(f"the server's metadata names another resource: {protected.resource}")
                resource = str(protected.resource)
            issuer_url = str(protected.authorization_servers[0]) if protected is not None else None
            metadata = await self._authorization_server(http, issuer_url, server_url)
            scope = get_client_metadata_scopes(challenged_scope, protected, metadata, _GRANT_TYPES)
            info = await self._client_info(http, metadata, redirect_uri, scope, client, registration)
        pkce = PKCEParameters.generate()
        parameters = {
            "response_type": "code",
            "client_id": info.client_id,
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": pkce.code_challenge,
            "code_challenge_method": "S256",
            "resource": resource,
        }
        if scope:
            parameters["scope"] = scope
        stored = {
            "server_url": server_url,
            "resource": resource,
            "scope": scope,
            "redirect_uri": redirect_uri,
            "metadata": metadata.model_dump(mode="json", exclude_none=True),
            "client": info.model_dump(mode="json", exclude_none=True),
        }
        return AuthorizationRequest(
            url=f"{metadata.authorization_endpoint}?{urlencode(parameters)}",
            code_verifier=pkce.code_verifier,
            registration=json.dumps(stored),
        )

    async def _authorization_server(
        self, http: httpx2.AsyncClient, issuer_url: str | None, server_url: str
    ) -> OAuthMetadata:
        for url in build_oauth_authorization_server_metadata_discovery_urls(issuer_url, server_url):
            ok, metadata = await handle_auth_metadata_response(
                await self._send(http, create_oauth_metadata_request(url))
            )
            if not ok:
                break
            if metadata is not None:
                # RFC 8414 3.3: the metadata names the issuer it was looked up for (on the legacy path without
                # resource metadata, the MCP server's origin).
                parts = httpx2.URL(server_url)
                expected = issuer_url or f"{parts.scheme}://{parts.netloc.decode()}"
                if not issuers_match(str(metadata.issuer), expected):
                    raise OAuthRefused(
                        f"the authorization server's metadata names issuer {metadata.issuer}, not {expected}"
                    )
                return metadata
        raise OAuthRefused("the MCP server's authorization server publishes no OAuth metadata")

    async def _client_info(
        self,
        http: httpx2.AsyncClient,
        metadata: OAuthMetadata,
        redirect_uri: str,
        scope: str | None,
        client: OAuthClientCredentials | None,
        registration: str | None,
    ) -> OAuthClientInformationFull:
        if client is not None:
            return OAuthClientInformationFull(
                client_id=client.client_id,
                client_secret=client.client_secret,
                token_endpoint_auth_method="client_secret_post" if client.client_secret else "none",
                redirect_uris=[redirect_uri],
                grant_types=_GRANT_TYPES,
            )
        if registration is not None:
            # The client registered earlier is reused while it is for the same server and callback.
            previous = json.loads(registration)
            known = OAuthClientInformationFull.model_validate(previous["client"])
            if previous.get("redirect_uri") == redirect_uri and issuers_match(
                str(previous["metadata"]["issuer"]), str(metadata.issuer)
            ):
                return known
        if metadata.registration_endpoint is None:
            raise OAuthRefused(
                "the authorization server offers no dynamic client registration: register Threadline with it "
                "and enter `client_id:client_secret` (or `client_id`) as the integration's credentials"
            )
        wanted = OAuthClientMetadata(
            redirect_uris=[redirect_uri],
            grant_types=_GRANT_TYPES,
            response_types=["code"],
            token_endpoint_auth_method="client_secret_post",
            scope=scope,
            client_name=CLIENT_NAME,
            application_type="web",
        )
        request = create_client_registration_request(metadata, wanted, str(metadata.issuer))
        try:
            info = await handle_registration_response(await self._send(http, request))
            check_registration_usable(info)
        except OAuthRegistrationError as error:
            raise OAuthRefused(f"registering with the authorization server failed: {str(error)[:300]}") from None
        info.issuer = str(metadata.issuer)
        return info

    async def exchange_code(
        self, *, registration: str, code: str, code_verifier: str, redirect_uri: str
    ) -> OAuthTokens:
        data = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": code_verifier,
        }
        return await self._token_request(registration, data)

    async def refresh(self, *, registration: str, refresh_token: str) -> OAuthTokens:
        return await self._token_request(registration, {"grant_type": "refresh_token", "refresh_token": refresh_token})

    async def _token_request(self, registration: str, data: dict[str, str]) -> OAuthTokens:
        stored = json.loads(registration)
        metadata = OAuthMetadata.model_validate(stored["metadata"])
        info = OAuthClientInformationFull.model_validate(stored["client"])
        context = OAuthContext(
            server_url=stored["server_url"],
            client_metadata=OAuthClientMetadata(redirect_uris=None, grant_types=_GRANT_TYPES),
            storage=None,  # type: ignore[arg-type]  # only its client authentication is used
            redirect_handler=None,
            callback_handler=None,
            client_info=info,
        )
        body, headers = context.prepare_token_auth(
            {**data, "client_id": info.client_id, "resource": stored["resource"]},
            {"Content-Type": "application/x-www-form-urlencoded"},
        )
        request = httpx2.Request("POST", str(metadata.token_endpoint), data=body, headers=headers)
        async with self._client() as http:
            response = await self._send(http, request)
            await response.aread()
        if response.status_code != 200:
            raise OAuthRefused(f"the authorization server refused the token request ({_error_code(response)})")
        try:
            token = OAuthToken.model_validate_json(response.content)
        except ValidationError:
            raise OAuthRefused("the authorization server answered the token request with no valid token") from None
        return OAuthTokens(
            access_token=token.access_token,
            refresh_token=token.refresh_token,
            expires_in=int(token.expires_in) if token.expires_in is not None else None,
            scope=token.scope,
        )


class AuthorizedRequests(httpx2.Auth):
    """Sends an integration's requests with its current access token; a token the server refuses is
    replaced once (refreshed, or another process's newer one) and the request sent again. When no token
    can be had the request leaves without one, and `failure` says why (the re-authorize link)."""

    def __init__(self, authorizer: McpAuthorizer) -> None:
        self._authorizer = authorizer
        self._lock = asyncio.Lock()
        self.failure: McpAuthFailed | None = None

    async def _token(self, refused: str | None = None) -> str | None:
        async with self._lock:  # one refresh at a time for this session's concurrent requests
            try:
                token = await self._authorizer.access_token(refused=refused)
            except McpAuthFailed as failure:
                self.failure = failure
                return None
        self.failure = None
        return token

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        token = await self._token()
        if token is not None:
            request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code != 401 or token is None:
            return
        renewed = await self._token(refused=token)
        if renewed is None or renewed == token:
            return
        request.headers["Authorization"] = f"Bearer {renewed}"
        yield request


class _MemoryTokens:
    """Client-credentials tokens live with the session: a new session simply asks for a new one."""

    def __init__(self) -> None:
        self._tokens: OAuthToken | None = None
        self._client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info


def auth_for(target: McpTarget, authorizers: Callable[[McpTarget], McpAuthorizer]) -> httpx2.Auth | None:
    """How the requests of a target's session authenticate, when it uses OAuth."""
    if target.auth_type is AuthType.OAUTH:
        return AuthorizedRequests(authorizers(target))
    if target.auth_type is AuthType.CLIENT_CREDENTIALS and target.oauth_client is not None and target.url:
        client_id, client_secret = target.oauth_client
        with warnings.catch_warnings():
            # No issuer is configured: the MCP server the admin chose names its authorization server.
            warnings.simplefilter("ignore")
            return ClientCredentialsOAuthProvider(
                target.url,
                _MemoryTokens(),
                client_id,
                client_secret or "",
                token_endpoint_auth_method="client_secret_post",
            )
    return None


def auth_failure(auth: httpx2.Auth | None) -> McpAuthFailed | None:
    return auth.failure if isinstance(auth, AuthorizedRequests) else None
