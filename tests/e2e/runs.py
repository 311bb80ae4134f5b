"""Helpers for tests that start and follow runs over HTTP."""

import json
from typing import Any

import httpx

from tests.conftest import Tenant


def sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")]


async def settle(client: httpx.AsyncClient, tenant: Tenant, run_id: str) -> dict[str, Any]:
    """Follow the run until it ends or waits for the client (the event stream closes then)."""
    stream = await client.get(f"/v1/runs/{run_id}/events", headers=tenant.admin)
    assert stream.status_code == 200
    run: dict[str, Any] = (await client.get(f"/v1/runs/{run_id}", headers=tenant.admin)).json()
    return run


async def agent_and_thread(
    client: httpx.AsyncClient, tenant: Tenant, **agent: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    created = await client.post(
        "/v1/agents", json={"name": "Helper", "model": "gpt-test"} | agent, headers=tenant.admin
    )
    assert created.status_code == 201, created.text
    thread = await client.post("/v1/threads", json={"agent_id": created.json()["id"]}, headers=tenant.admin)
    return created.json(), thread.json()


async def start(client: httpx.AsyncClient, tenant: Tenant, thread: dict[str, Any], **body: Any) -> dict[str, Any]:
    response = await client.post(f"/v1/threads/{thread['id']}/runs", json=body, headers=tenant.admin)
    assert response.status_code == 201, response.text
    run: dict[str, Any] = response.json()
    return run


async def messages(client: httpx.AsyncClient, tenant: Tenant, thread: dict[str, Any]) -> list[dict[str, Any]]:
    listed = await client.get(f"/v1/threads/{thread['id']}/messages?limit=100", headers=tenant.admin)
    page: list[dict[str, Any]] = listed.json()["data"]
    return page
