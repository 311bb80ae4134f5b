"""Bad input at the edges: answered with a 4xx {"error", "detail"}, never a 500, the same on every database."""

import base64
from typing import Any

import httpx
import pytest

from application.errors import SlugTaken
from application.use_cases.organizations import CreateOrganizationCommand
from domain.errors import InvalidValue
from infrastructure.container import Container
from tests.conftest import Tenant

NUL = "\u0000"


def refused(response: httpx.Response, status: int = 422) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"error", "detail"}, body
    return body


async def an_agent(client: httpx.AsyncClient, tenant: Tenant, **fields: Any) -> dict[str, Any]:
    response = await client.post(
        "/v1/agents", json={"name": "Helper", "model": "threadline-offline"} | fields, headers=tenant.admin
    )
    assert response.status_code == 201, response.text
    agent: dict[str, Any] = response.json()
    return agent


async def a_thread(client: httpx.AsyncClient, tenant: Tenant, agent: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/v1/threads", json={"agent_id": agent["id"]}, headers=tenant.admin)
    assert response.status_code == 201, response.text
    thread: dict[str, Any] = response.json()
    return thread


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


# -- names and slugs ---------------------------------------------------------------------------------


async def test_slugs_are_transliterated_from_names_and_numbered_when_taken(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    slugs = []
    for name in ("Поддержка клиентов", "Поддержка клиентов", "Ακμή", "カスタマー", "Straße"):
        response = await client.post("/v1/agents", json={"name": name}, headers=tenant.admin)
        assert response.status_code == 201, response.text
        slugs.append(response.json()["slug"])
    assert slugs == ["podderzhka-klientov", "podderzhka-klientov-2", "akmi", "kasutama", "strasse"]
    explicit = await client.post("/v1/agents", json={"name": "Other", "slug": "akmi"}, headers=tenant.admin)
    assert refused(explicit, 409)["error"] == "SlugTaken"

    integrations = []
    for _ in range(2):
        response = await client.post(
            "/v1/mcp-integrations", json={"name": "Документы", "url": "http://127.0.0.1:9/mcp"}, headers=tenant.admin
        )
        assert response.status_code == 201, response.text
        integrations.append(response.json()["slug"])
    assert integrations == ["dokumenty", "dokumenty-2"]


async def test_organizations_get_transliterated_slugs_and_visible_names(container: Container) -> None:
    create = container.create_organization()
    created = await create.execute(CreateOrganizationCommand(name="Ωμέγα Λτδ"))
    assert created.organization.slug == "omega-ltd"
    with pytest.raises(SlugTaken):  # a second organization of the same name is a mistake to tell
        await create.execute(CreateOrganizationCommand(name="Ωμέγα Λτδ"))
    with pytest.raises(InvalidValue):
        await create.execute(CreateOrganizationCommand(name="Evil\u202eCorp"))


@pytest.mark.parametrize(
    "name",
    [
        "Admin\u202egnp.exe",
        "Sup\u200bport",
        "Line\nbreak",
        "Tab\there",
        "Bell\u0007",
        "Iso\u2066late\u2069",
        "\ufeffBom",
    ],
)
async def test_names_with_hidden_or_reordering_characters_are_refused(
    client: httpx.AsyncClient, tenant: Tenant, name: str
) -> None:
    agent = await an_agent(client, tenant)
    refused(await client.post("/v1/agents", json={"name": name}, headers=tenant.admin))
    refused(await client.patch(f"/v1/agents/{agent['id']}", json={"name": name}, headers=tenant.admin))
    refused(await client.post("/v1/api-keys", json={"name": name}, headers=tenant.admin))
    refused(
        await client.post(
            "/v1/mcp-integrations", json={"name": name, "url": "http://127.0.0.1:9/mcp"}, headers=tenant.admin
        )
    )
    hidden = next(c for c in name if not c.isalnum())
    refused(await client.post("/v1/agents", json={"name": "Fine", "slug": f"fi{hidden}ne"}, headers=tenant.admin))
    assert [a["name"] for a in (await client.get("/v1/agents", headers=tenant.admin)).json()["data"]] == ["Helper"]
    assert (await client.get("/v1/mcp-integrations", headers=tenant.admin)).json()["data"] == []


async def test_names_keep_joiners_that_scripts_and_emoji_need(client: httpx.AsyncClient, tenant: Tenant) -> None:
    for name in ("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "Team 👩\u200d💻"):
        response = await client.post("/v1/agents", json={"name": name}, headers=tenant.admin)
        assert response.status_code == 201, response.text
        assert response.json()["name"] == name
