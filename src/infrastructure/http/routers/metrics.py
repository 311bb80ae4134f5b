"""/metrics: the process's Prometheus metrics, for the operator only (THREADLINE_METRICS_TOKEN as Bearer token;
without the setting the route does not exist). An API key is not the operator's token: it gets 401."""

import hmac
from typing import Annotated

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from infrastructure.container import Container
from infrastructure.execution.run_queue import QueueHealth
from infrastructure.http.bearer import bearer_token
from infrastructure.http.errors import CHALLENGE, error_response
from infrastructure.metrics import CONTENT_TYPE, Metrics
from infrastructure.settings import Settings

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
@inject
async def metrics(
    request: Request,
    settings: Annotated[Settings, Depends(Provide[Container.settings])],
    registry: Annotated[Metrics, Depends(Provide[Container.metrics])],
    executor: Annotated[object, Depends(Provide[Container.run_executor])],
) -> Response:
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
    if not token:
        return error_response(404, "NotFound", "No route matches the path")
    given = bearer_token(request.headers.get("authorization"))
    if given is None or not hmac.compare_digest(given.encode(), token.encode()):
        return error_response(
            401, "NotAuthenticated", "the metrics need the operator's token", {"WWW-Authenticate": CHALLENGE}
        )
    if isinstance(executor, QueueHealth):
        queue = await executor.health()
        if queue is not None:
            registry.queued_runs.set(queue["queued_runs"])
            registry.workers.set(queue["workers"])
    return Response(registry.exposition(), media_type=CONTENT_TYPE)
