"""The API while its database cannot be reached: 503 with Retry-After, and /readyz says the database is why."""

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager
from dependency_injector import providers

from infrastructure.container import Container
from infrastructure.http.app import ROUTERS, create_app
from infrastructure.settings import Settings
from tests.unreachable import Unreachable, unreachable_database_urls

KEY = {"Authorization": "Bearer tl_abcdefghijkl_" + "s" * 43}
"""Well formed, so that authentication has to look it up."""


@pytest.fixture(params=list(unreachable_database_urls()))
async def client(
    request: pytest.FixtureRequest, tmp_path: Path, container: Container
) -> AsyncIterator[httpx.AsyncClient]:
    unreachable: Unreachable = request.param
    with unreachable(tmp_path) as database_url:
        outage = Container()
        settings = Settings(
            database_url=database_url,
            log_format="text",
            secret_key=["test secret key"],
            data_dir=tmp_path / "data",
            recover_runs=False,
        )
        outage.settings.override(providers.Object(settings))
        app = create_app(outage)
        try:
            async with LifespanManager(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
                    yield http
        finally:
            # Wiring is per module, not per app: the routes go back to the suite's container.
            container.wire(modules=[*ROUTERS, "infrastructure.http.auth"])


def assert_storage_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) > 0
    body = response.json()
    assert body["error"] == "StorageUnavailable" and "database" in body["detail"]


async def test_requests_are_answered_503_with_retry_after(client: httpx.AsyncClient) -> None:
    assert_storage_unavailable(await client.get("/v1/agents", headers=KEY))
    assert_storage_unavailable(await client.post("/v1/agents", json={"name": "Helper"}, headers=KEY))


async def test_the_mcp_endpoint_answers_503_too(client: httpx.AsyncClient) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    headers = KEY | {"Accept": "application/json, text/event-stream"}
    assert_storage_unavailable(await client.post("/mcp", json=initialize, headers=headers))


async def test_readiness_names_the_database(client: httpx.AsyncClient) -> None:
    ready = await client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["error"] == "NotReady" and "database" in ready.json()["detail"]
    assert (await client.get("/healthz")).status_code == 200
