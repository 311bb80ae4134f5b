from typing import Annotated

from dependency_injector.wiring import Provide, inject
from fastapi import Depends, Request

from application.caller import Caller
from application.use_cases.api_keys import AuthenticateApiKey
from infrastructure.container import Container


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


@inject
async def current_caller(
    request: Request,
    authenticate: Annotated[AuthenticateApiKey, Depends(Provide[Container.authenticate_api_key])],
) -> Caller:
    return await authenticate.execute(bearer_token(request))


CallerDep = Annotated[Caller, Depends(current_caller)]
