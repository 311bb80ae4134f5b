from typing import Annotated

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends

from application.errors import OrganizationNotFound, PermissionDenied
from application.use_cases.organizations import GetMe, UpdateOrganization
from domain.errors import InvalidValue
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openapi import ApiRoute, errors
from infrastructure.http.schemas.organizations import MeOut, OrganizationOut, OrganizationUpdate

router = APIRouter(prefix="/v1", tags=["organization"], route_class=ApiRoute)


@router.get("/me", response_model=MeOut, summary="The caller's organization and role")
@inject
async def get_me(caller: CallerDep, use_case: Annotated[GetMe, Depends(Provide[Container.get_me])]) -> MeOut:
    return MeOut.model_validate(await use_case.execute(caller))


@router.get("/organization", response_model=OrganizationOut, summary="The caller's organization and its settings")
@inject
async def get_organization(
    caller: CallerDep, use_case: Annotated[GetMe, Depends(Provide[Container.get_me])]
) -> OrganizationOut:
    return OrganizationOut.model_validate((await use_case.execute(caller)).organization)


@router.patch(
    "/organization",
    response_model=OrganizationOut,
    summary="Change the organization's settings (admins)",
    responses=errors(PermissionDenied, InvalidValue, OrganizationNotFound),
)
@inject
async def update_organization(
    body: OrganizationUpdate,
    caller: CallerDep,
    use_case: Annotated[UpdateOrganization, Depends(Provide[Container.update_organization])],
) -> OrganizationOut:
    return OrganizationOut.model_validate(await use_case.execute(body.to_command(caller)))
