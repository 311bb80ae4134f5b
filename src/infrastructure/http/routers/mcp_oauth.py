"""OAuth 2.1 authorization of integrations: an admin starts it, the authorization server's redirect completes it."""

from typing import Annotated
from uuid import UUID

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Query, Request

from application.errors import McpAuthFailed, McpIntegrationNotFound, PermissionDenied, UrlNotAllowed
from application.use_cases.api_keys import AuthenticateApiKey
from application.use_cases.mcp_oauth import (
    CompleteMcpAuthorization,
    CompleteMcpAuthorizationCommand,
    NotAnOAuthIntegration,
    StartMcpAuthorization,
    StartMcpAuthorizationCommand,
)
from domain.ids import IntegrationId
from domain.oauth_grants import AuthorizationNotPending
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.bearer import api_key
from infrastructure.http.openapi import ApiRoute, errors
from infrastructure.http.schemas.integrations import IntegrationOut
from infrastructure.http.schemas.mcp_oauth import AuthorizationOut

router = APIRouter(prefix="/v1/mcp-integrations", tags=["MCP integrations"], route_class=ApiRoute)
_CALLBACK = "complete_mcp_authorization"
_PARAMETER_MAX = 2_048


@router.post(
    "/{integration_id}/oauth/authorize",
    response_model=AuthorizationOut,
    summary="Start authorizing an oauth integration (admin)",
    description="Discovers the MCP server's authorization server (protected-resource and authorization-server "
    "metadata), registers a client with it when the integration's credentials name none, and answers the "
    "authorization URL (PKCE). The state in it is single use, expires, and completes only this integration "
    "for this admin key. Also the way to authorize again after `McpAuthFailed`.",
    responses=errors(PermissionDenied, McpIntegrationNotFound, NotAnOAuthIntegration, McpAuthFailed, UrlNotAllowed),
)
@inject
async def start_mcp_authorization(
    integration_id: UUID,
    request: Request,
    caller: CallerDep,
    use_case: Annotated[StartMcpAuthorization, Depends(Provide[Container.start_mcp_authorization])],
) -> AuthorizationOut:
    redirect_uri = str(request.url_for(_CALLBACK, integration_id=integration_id))
    command = StartMcpAuthorizationCommand(
        caller=caller, integration_id=IntegrationId(integration_id), redirect_uri=redirect_uri
    )
    return AuthorizationOut.model_validate(await use_case.execute(command))


@router.get(
    "/{integration_id}/oauth/callback",
    name=_CALLBACK,
    response_model=IntegrationOut,
    summary="Complete an authorization (the authorization server's redirect)",
    description="Where the authorization server sends the browser back. The state authorizes the call, so a "
    "browser needs no API key; a request that carries one must be the admin key that started it.",
    responses=errors(
        PermissionDenied, McpIntegrationNotFound, AuthorizationNotPending, NotAnOAuthIntegration, McpAuthFailed
    ),
)
@inject
async def complete_mcp_authorization(
    integration_id: UUID,
    key: Annotated[str | None, Depends(api_key)],
    authenticate: Annotated[AuthenticateApiKey, Depends(Provide[Container.authenticate_api_key])],
    use_case: Annotated[CompleteMcpAuthorization, Depends(Provide[Container.complete_mcp_authorization])],
    state: Annotated[str, Query(min_length=1, max_length=_PARAMETER_MAX)],
    code: Annotated[str | None, Query(min_length=1, max_length=_PARAMETER_MAX)] = None,
    error: Annotated[str | None, Query(max_length=_PARAMETER_MAX)] = None,
) -> IntegrationOut:
    caller = await authenticate.execute(key) if key is not None else None
    command = CompleteMcpAuthorizationCommand(
        integration_id=IntegrationId(integration_id), state=state, code=code, error=error, caller=caller
    )
    return IntegrationOut.model_validate(await use_case.execute(command))
