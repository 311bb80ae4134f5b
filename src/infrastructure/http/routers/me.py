from typing import Annotated

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends

from application.use_cases.organizations import GetMe
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openapi import ApiRoute
from infrastructure.http.schemas.organizations import MeOut

router = APIRouter(prefix="/v1", tags=["organization"], route_class=ApiRoute)


@router.get("/me", response_model=MeOut, summary="The caller's organization and role")
@inject
async def get_me(caller: CallerDep, use_case: Annotated[GetMe, Depends(Provide[Container.get_me])]) -> MeOut:
    return MeOut.model_validate(await use_case.execute(caller))
