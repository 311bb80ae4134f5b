from typing import Annotated
from uuid import UUID

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends

from application.errors import ApiKeyNotFound, Conflict, PermissionDenied
from application.pagination import PageRequest
from application.use_cases.api_keys import CreateApiKey, ListApiKeys, RevokeApiKey
from domain.errors import InvalidValue
from domain.ids import ApiKeyId
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openapi import ApiRoute, errors
from infrastructure.http.schemas.api_keys import ApiKeyCreate, ApiKeyOut, IssuedApiKeyOut
from infrastructure.http.schemas.common import PageOut, page_request

router = APIRouter(prefix="/v1/api-keys", tags=["api keys"], route_class=ApiRoute)


@router.post(
    "",
    status_code=201,
    response_model=IssuedApiKeyOut,
    summary="Create a key (admin); its secret is shown once",
    responses=errors(PermissionDenied, InvalidValue, Conflict),
)
@inject
async def create_api_key(
    body: ApiKeyCreate,
    caller: CallerDep,
    use_case: Annotated[CreateApiKey, Depends(Provide[Container.create_api_key])],
) -> IssuedApiKeyOut:
    return IssuedApiKeyOut.issued(await use_case.execute(body.to_command(caller)))


@router.get(
    "",
    response_model=PageOut[ApiKeyOut],
    summary="List the organization's keys (admin)",
    responses=errors(PermissionDenied),
)
@inject
async def list_api_keys(
    caller: CallerDep,
    page: Annotated[PageRequest, Depends(page_request)],
    use_case: Annotated[ListApiKeys, Depends(Provide[Container.list_api_keys])],
) -> PageOut[ApiKeyOut]:
    result = await use_case.execute(caller, page)
    return PageOut[ApiKeyOut].model_validate(result)


@router.post(
    "/{key_id}/revoke",
    response_model=ApiKeyOut,
    summary="Revoke a key (admin)",
    responses=errors(PermissionDenied, ApiKeyNotFound, Conflict),
)
@inject
async def revoke_api_key(
    key_id: UUID,
    caller: CallerDep,
    use_case: Annotated[RevokeApiKey, Depends(Provide[Container.revoke_api_key])],
) -> ApiKeyOut:
    return ApiKeyOut.model_validate(await use_case.execute(caller, ApiKeyId(key_id)))
