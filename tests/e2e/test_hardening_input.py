"""Bad input at the edges: answered with a 4xx {"error", "detail"}, never a 500, the same on every database."""

import base64
from typing import Any

import httpx
import pytest

from tests.conftest import Tenant

NUL = "\u0000"


def refused(response: httpx.Response, status: int = 422) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "detail"}, body
    return body


async def an_agent(client: httpx.AsyncClient, tenant: Tenant, **fields: Any) -> dict[str, Any]:
    response = await client.post(
        "/v1/agents", json={"name": "Helper", "model": "threadline-offline"} | fields, headers=tenant.admin
    )
    assert response.status_code == 201, response.text
    return response.json()


async def a_thread(client: httpx.AsyncClient, tenant: Tenant, agent: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/v1/threads", json={"agent_id": agent["id"]}, headers=tenant.admin)
    assert response.status_code == 201, response.text
    return response.json()


# -- NUL characters ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"title": f"a{NUL}b"},
        {"metadata": {"key": f"va{NUL}lue"}},
        {"metadata": {f"k{NUL}ey": "value"}},
    ],
)
async def test_nul_in_a_thread_is_refused_and_nothing_is_stored(
    client: httpx.AsyncClient, tenant: Tenant, body: dict[str, Any]
) -> None:
    body = refused(await client.post("/v1/threads", json=body, headers=tenant.admin))
    assert body["error"] == "ValidationError" and "NUL" in body["detail"]
    assert (await client.get("/v1/threads", headers=tenant.admin)).json()["data"] == []


async def test_nul_in_messages_runs_and_their_tools_is_refused(client: httpx.AsyncClient, tenant: Tenant) -> None:
    thread = await a_thread(client, tenant, await an_agent(client, tenant))
    messages = f"/v1/threads/{thread['id']}/messages"
    refused(await client.post(messages, json={"content": f"hello{NUL}"}, headers=tenant.admin))
    refused(await client.post(messages, json={"content": [{"type": "text", "text": NUL}]}, headers=tenant.admin))
    runs = f"/v1/threads/{thread['id']}/runs"
    tool = {"name": "locate", "parameters": {"type": "object", "properties": {f"x{NUL}": {"type": "string"}}}}
    for body in (
        {"input": f"hi{NUL}"},
        {"input": "hi", "idempotency_key": f"key{NUL}"},
        {"input": "hi", "tools": [tool]},
        {"input": "hi", "tools": [{"name": "locate", "description": f"d{NUL}"}]},
    ):
        detail = refused(await client.post(runs, json=body, headers=tenant.admin))["detail"]
        assert "NUL" in detail, body
    assert (await client.get(messages, headers=tenant.admin)).json()["data"] == []
    assert (await client.get(runs, headers=tenant.admin)).json()["data"] == []


async def test_nul_in_agents_integrations_and_prompt_templates_is_refused(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    agent = await an_agent(client, tenant, slug="writer")
    refused(await client.post("/v1/agents", json={"name": f"Bot{NUL}"}, headers=tenant.admin))
    refused(await client.patch(f"/v1/agents/{agent['id']}", json={"instructions": NUL}, headers=tenant.admin))
    refused(
        await client.post(
            "/v1/agents",
            json={"name": "Tools", "tools": [{"type": "command", "config": {"name": NUL}}]},
            headers=tenant.admin,
        )
    )
    refused(
        await client.post(
            "/v1/mcp-integrations", json={"name": "Docs", "url": f"http://127.0.0.1:1/{NUL}"}, headers=tenant.admin
        )
    )
    template = {
        "name": "notes",
        "agent_id": agent["id"],
        "arguments": [{"name": "tone", "default": "calm"}],
        "messages": [{"role": "user", "content": "In a {tone} tone."}],
    }
    for argument in ({"name": "tone", "default": NUL}, {"name": "tone", "autocomplete": ["calm", f"x{NUL}"]}):
        refused(
            await client.post("/v1/prompt-templates", json=template | {"arguments": [argument]}, headers=tenant.admin)
        )
    assert (await client.post("/v1/prompt-templates", json=template, headers=tenant.admin)).status_code == 201
    render = "/v1/prompt-templates/notes/render"
    refused(await client.post(render, json={"arguments": {"tone": f"x{NUL}"}}, headers=tenant.admin))
    refused(await client.post(render, json={"arguments": {f"t{NUL}": "x"}}, headers=tenant.admin))
    assert (await client.get("/v1/prompt-templates/notes", headers=tenant.admin)).json()["arguments"][0][
        "default"
    ] == "calm"
    agents = (await client.get("/v1/agents", headers=tenant.admin)).json()["data"]
    assert [(a["name"], a["instructions"]) for a in agents] == [("Helper", "")]


async def test_nul_in_the_path_or_the_query_is_refused(client: httpx.AsyncClient, tenant: Tenant) -> None:
    refused(await client.get("/v1/prompt-templates/no%00pe", headers=tenant.admin))
    refused(await client.delete("/v1/prompt-templates/no%00pe", headers=tenant.admin))
    refused(await client.get("/v1/threads", params={"cursor": f"x{NUL}"}, headers=tenant.admin))


# -- integers out of range ---------------------------------------------------------------------------


def position_cursor(key: str) -> str:
    return base64.urlsafe_b64encode(f"v1:{key}".encode()).decode().rstrip("=")


@pytest.mark.parametrize("key", [str(2**31), str(2**70), "²", "1²"])
async def test_a_message_cursor_out_of_range_is_a_bad_request(
    client: httpx.AsyncClient, tenant: Tenant, key: str
) -> None:
    thread = await a_thread(client, tenant, await an_agent(client, tenant))
    response = await client.get(
        f"/v1/threads/{thread['id']}/messages", params={"cursor": position_cursor(key)}, headers=tenant.admin
    )
    assert refused(response, 400)["error"] == "InvalidCursor"


async def test_event_positions_out_of_range_are_refused(client: httpx.AsyncClient, tenant: Tenant) -> None:
    thread = await a_thread(client, tenant, await an_agent(client, tenant))
    run = (await client.post(f"/v1/threads/{thread['id']}/runs", json={"input": "hi"}, headers=tenant.admin)).json()
    events = f"/v1/runs/{run['id']}/events"
    assert (await client.get(events, headers=tenant.admin)).status_code == 200
    for huge in (2**31, 2**70):
        assert refused(await client.get(events, params={"after": huge}, headers=tenant.admin))["error"] == (
            "ValidationError"
        )
        response = await client.get(events, headers=tenant.admin | {"Last-Event-ID": str(huge)})
        assert refused(response)["error"] == "ValidationError"
    last = await client.get(events, params={"after": 2**31 - 1}, headers=tenant.admin)
    assert last.status_code == 200 and "data:" not in last.text
