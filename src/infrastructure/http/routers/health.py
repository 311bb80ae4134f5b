from typing import Annotated

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from infrastructure.container import Container
from infrastructure.http.errors import error_response
from infrastructure.persistence.readiness import DatabaseReadiness

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The database answers and its schema is current")
@inject
async def readyz(
    readiness: Annotated[DatabaseReadiness, Depends(Provide[Container.readiness])],
) -> JSONResponse:
    problem = await readiness.problem()
    if problem is not None:
        return error_response(503, "NotReady", problem)
    return JSONResponse({"status": "ready"})
