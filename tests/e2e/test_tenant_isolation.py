"""Two organizations side by side: nothing one owns can be read, listed, changed or deleted by the other."""

import httpx
import pytest

from tests.conftest import MakeTenant, Tenant
from tests.fakes.mcp_server import FakeMcpServer

pytestmark = pytest.mark.executors


@pytest.fixture
async def owned(
    client: httpx.AsyncClient,
    make_tenant: MakeTenant,
    mcp_server: FakeMcpServer,
) -> tuple[Tenant, Tenant, dict[str, str]]:
    owner, intruder = await make_tenant("Owner"), await make_tenant("Intruder")
    agent = (await client.post("/v1/agents", json={"name": "Secret agent"}, headers=owner.admin)).json()
    thread = (await client.post("/v1/threads", json={"agent_id": agent["id"]}, headers=owner.admin)).json()
    await client.post(f"/v1/threads/{thread['id']}/messages", json={"content": "private"}, headers=owner.admin)
    key = (await client.post("/v1/api-keys", json={"name": "owner key"}, headers=owner.admin)).json()
    body = {"name": "Memo", "url": mcp_server.url}
    integration = (await client.post("/v1/mcp-integrations", json=body, headers=owner.admin)).json()
    imported = await client.post(
        f"/v1/mcp-integrations/{integration['id']}/resources/read",
        json={"uri": "memo://notes", "import": True, "thread_id": thread["id"]},
        headers=owner.admin,
    )
    other = (await client.post("/v1/threads", json={"agent_id": agent["id"]}, headers=owner.admin)).json()
    run = await client.post(f"/v1/threads/{other['id']}/runs", json={"input": "hi"}, headers=owner.admin)
    await client.get(f"/v1/runs/{run.json()['id']}/events", headers=owner.admin)  # until it is done
    return (
        owner,
        intruder,
        {
            "run": run.json()["id"],
            "agent": agent["id"],
            "thread": thread["id"],
            "key": key["id"],
            "integration": integration["id"],
            "source": imported.json()["sources"][0]["id"],
        },
    )


ROUTES: list[tuple[str, str, object]] = [
    ("GET", "/v1/agents/{agent}", None),
    ("PATCH", "/v1/agents/{agent}", {"name": "hijacked"}),
    ("DELETE", "/v1/agents/{agent}", None),
    ("GET", "/v1/threads/{thread}", None),
    ("DELETE", "/v1/threads/{thread}", None),
    ("GET", "/v1/threads/{thread}/messages", None),
    ("POST", "/v1/threads/{thread}/messages", {"content": "injected"}),
    ("POST", "/v1/api-keys/{key}/revoke", None),
    ("GET", "/v1/mcp-integrations/{integration}", None),
    ("PATCH", "/v1/mcp-integrations/{integration}", {"name": "hijacked"}),
    ("DELETE", "/v1/mcp-integrations/{integration}", None),
    ("POST", "/v1/mcp-integrations/{integration}/enable", None),
    ("POST", "/v1/mcp-integrations/{integration}/disable", None),
    ("POST", "/v1/mcp-integrations/{integration}/test", None),
    ("GET", "/v1/mcp-integrations/{integration}/tools", None),
    ("GET", "/v1/mcp-integrations/{integration}/resources", None),
    ("GET", "/v1/mcp-integrations/{integration}/resource-templates", None),
    ("GET", "/v1/mcp-integrations/{integration}/prompts", None),
    ("POST", "/v1/mcp-integrations/{integration}/tools/echo/call", {"arguments": {}}),
    ("POST", "/v1/mcp-integrations/{integration}/resources/read", {"uri": "memo://notes"}),
    ("POST", "/v1/mcp-integrations/{integration}/prompts/welcome/get", {}),
    ("POST", "/v1/mcp-integrations/{integration}/oauth/authorize", None),
    ("GET", "/v1/mcp-integrations/{integration}/oauth/callback?state=s&code=c", None),
    ("GET", "/v1/threads/{thread}/sources", None),
    ("GET", "/v1/agents/{agent}/sources", None),
    ("GET", "/v1/sources/{source}", None),
    ("GET", "/v1/sources/{source}/content", None),
    ("GET", "/v1/sources/{source}/passages", None),
    ("POST", "/v1/sources/{source}/reindex", None),
    ("DELETE", "/v1/sources/{source}", None),
    ("GET", "/v1/threads/{thread}/sources/search?q=notes", None),
    ("POST", "/v1/threads/{thread}/runs", {"input": "injected"}),
    ("GET", "/v1/threads/{thread}/runs", None),
    ("GET", "/v1/runs/{run}", None),
    ("GET", "/v1/runs/{run}/events", None),
    ("POST", "/v1/runs/{run}/cancel", None),
    ("POST", "/v1/runs/{run}/tool-results", {"tool_results": [{"tool_use_id": "x", "result": "y"}]}),
]


@pytest.mark.parametrize(("method", "template", "body"), ROUTES, ids=[f"{m} {t}" for m, t, _ in ROUTES])
async def test_another_organizations_object_is_not_found(
    client: httpx.AsyncClient,
    owned: tuple[Tenant, Tenant, dict[str, str]],
    method: str,
    template: str,
    body: object,
) -> None:
    owner, intruder, ids = owned
    url = template.format(**ids)
    response = await client.request(method, url, json=body, headers=intruder.admin)
    assert response.status_code == 404, response.text
    assert response.json()["error"].endswith("NotFound")

    # The owner still sees everything exactly as before.
    agent = (await client.get(f"/v1/agents/{ids['agent']}", headers=owner.admin)).json()
    assert agent["name"] == "Secret agent"
    messages = (await client.get(f"/v1/threads/{ids['thread']}/messages", headers=owner.admin)).json()["data"]
    assert [m["content"][0]["text"] for m in messages] == ["private"]
    keys = (await client.get("/v1/api-keys", headers=owner.admin)).json()["data"]
    assert all(k["revoked_at"] is None for k in keys)
    integration = (await client.get(f"/v1/mcp-integrations/{ids['integration']}", headers=owner.admin)).json()
    assert (integration["name"], integration["enabled"], integration["connection_status"]) == (
        "Memo",
        True,
        "unknown",
    )
    assert (await client.get(f"/v1/sources/{ids['source']}", headers=owner.admin)).json()["text"]
    assert (await client.get(f"/v1/runs/{ids['run']}", headers=owner.admin)).json()["status"] == "completed"


async def test_lists_show_only_the_callers_objects(
    client: httpx.AsyncClient, owned: tuple[Tenant, Tenant, dict[str, str]]
) -> None:
    owner, intruder, ids = owned
    for url in (
        "/v1/agents",
        "/v1/threads",
        f"/v1/threads?agent_id={ids['agent']}",
        "/v1/mcp-integrations",
        "/v1/runs",
        f"/v1/runs?agent_id={ids['agent']}",
    ):
        assert (await client.get(url, headers=intruder.admin)).json()["data"] == [], url
    foreign_thread = await client.get(f"/v1/runs?thread_id={ids['thread']}", headers=intruder.admin)
    assert foreign_thread.status_code == 404
    intruder_keys = (await client.get("/v1/api-keys", headers=intruder.admin)).json()["data"]
    assert ids["key"] not in {k["id"] for k in intruder_keys}
    assert (await client.get("/v1/me", headers=intruder.admin)).json()["organization"]["slug"] == intruder.slug
    assert (await client.get("/v1/agents", headers=owner.admin)).json()["data"][0]["id"] == ids["agent"]


async def test_objects_cannot_be_linked_across_organizations(
    client: httpx.AsyncClient, owned: tuple[Tenant, Tenant, dict[str, str]]
) -> None:
    _owner, intruder, ids = owned
    linked = await client.post(
        "/v1/agents", json={"name": "Spy", "sub_agent_ids": [ids["agent"]]}, headers=intruder.admin
    )
    assert linked.status_code == 422
    bound = await client.post("/v1/threads", json={"agent_id": ids["agent"]}, headers=intruder.admin)
    assert bound.status_code == 422
    tools = await client.post(
        "/v1/agents",
        json={"name": "Spy", "mcp_integration_ids": [ids["integration"]]},
        headers=intruder.admin,
    )
    assert tools.status_code == 422
    own = (
        await client.post(
            "/v1/mcp-integrations",
            json={"name": "Mine", "url": "http://127.0.0.1:9/mcp"},
            headers=intruder.admin,
        )
    ).json()
    stolen = await client.post(
        f"/v1/mcp-integrations/{own['id']}/resources/read",
        json={"uri": "memo://notes", "import": True, "thread_id": ids["thread"]},
        headers=intruder.admin,
    )
    assert stolen.status_code == 422


async def test_another_organizations_agent_is_no_model_on_the_openai_compatible_routes(
    client: httpx.AsyncClient, owned: tuple[Tenant, Tenant, dict[str, str]]
) -> None:
    owner, intruder, ids = owned
    slug = (await client.get(f"/v1/agents/{ids['agent']}", headers=owner.admin)).json()["slug"]
    assert [m["id"] for m in (await client.get("/v1/models", headers=intruder.admin)).json()["data"]] == []
    calls = [
        ("GET", f"/v1/models/{slug}", None),
        ("POST", "/v1/chat/completions", {"model": slug, "messages": [{"role": "user", "content": "hi"}]}),
        ("POST", "/v1/responses", {"model": slug, "input": "hi"}),
    ]
    for method, url, body in calls:
        response = await client.request(method, url, json=body, headers=intruder.admin)
        assert response.status_code == 404, (url, response.text)
        assert response.json()["error"]["code"] == "model_not_found", url
    # The owner's run as the response to continue: not found to anyone else, and nothing is added to it.
    own_agent = (await client.post("/v1/agents", json={"name": "Mine"}, headers=intruder.admin)).json()
    continued = await client.post(
        "/v1/responses",
        json={"model": own_agent["slug"], "input": "hi", "previous_response_id": f"resp_{ids['run'].replace('-', '')}"},
        headers=intruder.admin,
    )
    assert continued.status_code == 404, continued.text
    run = (await client.get(f"/v1/runs/{ids['run']}", headers=owner.admin)).json()
    messages = (await client.get(f"/v1/threads/{run['thread_id']}/messages", headers=owner.admin)).json()["data"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert (await client.get("/v1/runs", headers=owner.admin)).json()["data"][-1]["id"] == ids["run"]
