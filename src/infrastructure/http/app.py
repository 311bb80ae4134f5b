import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.routing import Route

from infrastructure.console import router as console
from infrastructure.container import Container
from infrastructure.http.body_limit import BodyLimitMiddleware
from infrastructure.http.docs import install_docs
from infrastructure.http.errors import install_error_handlers
from infrastructure.http.inline_dependencies import inline_trivial_dependencies
from infrastructure.http.observation import RequestObservation
from infrastructure.http.routers import (
    agents,
    api_keys,
    audit_events,
    health,
    integrations,
    mcp_oauth,
    me,
    metrics,
    openai_compat,
    prompt_templates,
    runs,
    sources,
    threads,
    tools,
    usage,
)
from infrastructure.http.text_guard import NulInUrlMiddleware
from infrastructure.limits.rate_limits import KeyRequestRate
from infrastructure.resources import close_resources, open_resources
from infrastructure.settings import Executor

logger = logging.getLogger(__name__)
ROUTERS = (
    health,
    me,
    api_keys,
    agents,
    threads,
    tools,
    integrations,
    mcp_oauth,
    sources,
    runs,
    prompt_templates,
    openai_compat,
    usage,
    audit_events,
)


def create_app(container: Container | None = None) -> FastAPI:
    """The HTTP application, built from a container (a fresh one unless given)."""
    container = container or Container()
    container.wire(modules=[*ROUTERS, metrics, "infrastructure.http.auth"])

    endpoint = container.mcp_endpoint()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await open_resources(container)
        try:
            settings = container.settings()
            # In worker mode, runs belong to the workers: an API process that starts leaves them alone.
            if settings.recover_runs and settings.executor is Executor.IN_PROCESS:
                interrupted, resubmitted = await container.recover_runs().execute()
                if interrupted or resubmitted:
                    logger.info("recovered runs", extra={"interrupted": interrupted, "resubmitted": resubmitted})
            files = container.prompt_files()
            files.on_change(container.publishing_server().catalog_changed)
            await files.start()
            await container.passage_indexer().start()
            async with endpoint.running():
                yield
        finally:
            await close_resources(container)

    app = FastAPI(
        title="Threadline",
        version="0.1.0",
        description="Multi-tenant agent platform: agents, threads, runs, and MCP in both directions.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.container = container
    app.state.stopping = asyncio.Event()  # set by `threadline serve` when asked to stop (see cli.py)
    install_error_handlers(app)
    install_docs(app)
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=container.settings().max_request_bytes,
        max_source_bytes=container.settings().max_source_bytes,
    )
    app.add_middleware(NulInUrlMiddleware)
    settings = container.settings()
    app.add_middleware(
        KeyRequestRate,
        windows=container.rate_windows,
        per_minute=settings.key_requests_per_minute,
        clock=container.clock(),
    )
    app.add_middleware(RequestObservation, metrics=container.metrics())  # outermost: every answer has an id
    for module in ROUTERS:
        app.include_router(module.router)
    app.include_router(metrics.router)
    app.include_router(console.router)
    inline_trivial_dependencies(app)
    # The MCP endpoint is a plain ASGI app (the SDK's transport) behind API key authentication.
    for path in ("/mcp", "/mcp/"):
        app.router.routes.append(Route(path, endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False))
    return app
