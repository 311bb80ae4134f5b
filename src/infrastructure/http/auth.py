from typing import Annotated

from dependency_injector.wiring import Provide, inject
from fastapi import Depends

from application.caller import Caller
from application.use_cases.api_keys import AuthenticateApiKey
from infrastructure.container import Container
from infrastructure.http.bearer import api_key


@inject
async def current_caller(
    key: Annotated[str | None, Depends(api_key)],
    authenticate: Annotated[AuthenticateApiKey, Depends(Provide[Container.authenticate_api_key])],
) -> Caller:
    return await authenticate.execute(key)


CallerDep = Annotated[Caller, Depends(current_caller)]
