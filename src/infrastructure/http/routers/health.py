from typing import Annotated

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from infrastructure.container import Container
from infrastructure.execution.run_queue import QueueHealth
from infrastructure.http.errors import error_response
from infrastructure.http.openapi import ApiRoute, errors
from infrastructure.persistence.readiness import DatabaseReadiness

NOT_READY = ("NotReady", "The database cannot be reached or its schema is not current (or the job queue is down)")
router = APIRouter(tags=["health"], route_class=ApiRoute)


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="The database answers and its schema is current; in worker mode, the job queue's state too",
    responses=errors(also=[(503, NOT_READY)]),
)
@inject
async def readyz(
    readiness: Annotated[DatabaseReadiness, Depends(Provide[Container.readiness])],
    executor: Annotated[object, Depends(Provide[Container.run_executor])],
) -> JSONResponse:
    problem = await readiness.problem()
    if problem is not None:
        return error_response(503, "NotReady", problem)
    if isinstance(executor, QueueHealth):
        queue = await executor.health()
        if queue is None:
            return error_response(503, "NotReady", "the job queue cannot be reached")
        return JSONResponse({"status": "ready", "queue": queue})
    return JSONResponse({"status": "ready"})
