"""Two organizations side by side: nothing one owns can be read, listed, changed or deleted by the other."""

import httpx
import pytest

from tests.conftest import Tenant


@pytest.fixture
async def owned(client: httpx.AsyncClient, make_tenant) -> tuple[Tenant, Tenant, dict[str, str]]:  # type: ignore[no-untyped-def]
    owner, intruder = await make_tenant("Owner"), await make_tenant("Intruder")
    agent = (await client.post("/v1/agents", json={"name": "Secret agent"}, headers=owner.admin)).json()
    thread = (await client.post("/v1/threads", json={"agent_id": agent["id"]}, headers=owner.admin)).json()
    await client.post(
        f"/v1/threads/{thread['id']}/messages", json={"content": "private"}, headers=owner.admin
    )
    key = (await client.post("/v1/api-keys", json={"name": "owner key"}, headers=owner.admin)).json()
    return owner, intruder, {"agent": agent["id"], "thread": thread["id"], "key": key["id"]}


ROUTES = [
    ("GET", "/v1/agents/{agent}", None),
    ("PATCH", "/v1/agents/{agent}", {"name": "hijacked"}),
    ("DELETE", "/v1/agents/{agent}", None),
    ("GET", "/v1/threads/{thread}", None),
    ("DELETE", "/v1/threads/{thread}", None),
    ("GET", "/v1/threads/{thread}/messages", None),
    ("POST", "/v1/threads/{thread}/messages", {"content": "injected"}),
    ("POST", "/v1/api-keys/{key}/revoke", None),
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


async def test_lists_show_only_the_callers_objects(
    client: httpx.AsyncClient, owned: tuple[Tenant, Tenant, dict[str, str]]
) -> None:
    owner, intruder, ids = owned
    for url in ("/v1/agents", "/v1/threads", f"/v1/threads?agent_id={ids['agent']}"):
        assert (await client.get(url, headers=intruder.admin)).json()["data"] == [], url
    intruder_keys = (await client.get("/v1/api-keys", headers=intruder.admin)).json()["data"]
    assert ids["key"] not in {k["id"] for k in intruder_keys}
    assert (await client.get("/v1/me", headers=intruder.admin)).json()["organization"][
        "slug"
    ] == intruder.slug
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
