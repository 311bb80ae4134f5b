"""A worker's metrics, on a port of its own (THREADLINE_WORKER_METRICS_PORT on THREADLINE_METRICS_HOST): a worker
serves no API, and the port is the operator's (bind it where tenants cannot reach it)."""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from prometheus_client import start_http_server

from infrastructure.execution.run_queue import QueueHealth
from infrastructure.metrics import Metrics
from infrastructure.settings import Settings

logger = logging.getLogger(__name__)
QUEUE_READ_SECONDS = 5.0
"""How often a worker reads the queue's depth and the live workers for its metrics."""


@contextlib.asynccontextmanager
async def worker_metrics(metrics: Metrics, executor: object, settings: Settings) -> AsyncIterator[None]:
    if settings.worker_metrics_port is None:
        yield
        return
    server, thread = start_http_server(settings.worker_metrics_port, settings.metrics_host, registry=metrics.registry)
    logger.info("metrics served", extra={"host": settings.metrics_host, "port": settings.worker_metrics_port})
    reading = asyncio.create_task(_read_queue(metrics, executor))
    try:
        yield
    finally:
        reading.cancel()
        server.shutdown()
        thread.join(timeout=5)


async def _read_queue(metrics: Metrics, executor: object) -> None:
    if not isinstance(executor, QueueHealth):
        return
    while True:
        queue = await executor.health()
        if queue is not None:
            metrics.queued_runs.set(queue["queued_runs"])
            metrics.workers.set(queue["workers"])
        await asyncio.sleep(QUEUE_READ_SECONDS)
