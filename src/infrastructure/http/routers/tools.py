from typing import Annotated

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends

from application.use_cases.native_tools import ListNativeTools
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openapi import ApiRoute
from infrastructure.http.schemas.tools import NativeToolOut

router = APIRouter(prefix="/v1/tools", tags=["tools"], route_class=ApiRoute)


@router.get("", response_model=list[NativeToolOut], summary="Native tool types an agent may reference")
@inject
async def list_tools(
    _caller: CallerDep,
    use_case: Annotated[ListNativeTools, Depends(Provide[Container.list_native_tools])],
) -> list[NativeToolOut]:
    return [NativeToolOut.model_validate(spec) for spec in await use_case.execute()]
