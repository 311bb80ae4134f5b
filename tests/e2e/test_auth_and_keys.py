import httpx

from tests.conftest import Tenant, member_headers


async def test_me_shows_the_organization_and_role(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.get("/v1/me", headers=tenant.admin)
    assert response.status_code == 200
    body = response.json()
    assert body["organization"]["slug"] == tenant.slug
    assert body["role"] == "admin"


async def test_requests_without_a_valid_key_are_refused(client: httpx.AsyncClient) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer tl_aaaaaaaaaaaa_" + "x" * 43},
    ):
        response = await client.get("/v1/agents", headers=headers)
        assert response.status_code == 401
        assert response.json()["error"] == "NotAuthenticated"
        assert response.headers["www-authenticate"].startswith("Bearer")


async def test_an_admin_creates_a_member_key_that_works_and_is_shown_once(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    created = await client.post("/v1/api-keys", json={"name": "ci bot", "role": "member"}, headers=tenant.admin)
    assert created.status_code == 201
    secret = created.json()["key"]
    assert secret.startswith("tl_")

    me = await client.get("/v1/me", headers={"Authorization": f"Bearer {secret}"})
    assert me.json()["role"] == "member"

    listed = await client.get("/v1/api-keys", headers=tenant.admin)
    assert listed.status_code == 200
    assert secret not in listed.text
    assert {k["name"] for k in listed.json()["data"]} == {"first admin key", "ci bot"}
    assert all("key" not in k for k in listed.json()["data"])


async def test_a_revoked_key_stops_working(client: httpx.AsyncClient, tenant: Tenant) -> None:
    created = (await client.post("/v1/api-keys", json={"name": "temp"}, headers=tenant.admin)).json()
    headers = {"Authorization": f"Bearer {created['key']}"}
    assert (await client.get("/v1/me", headers=headers)).status_code == 200

    revoked = await client.post(f"/v1/api-keys/{created['id']}/revoke", headers=tenant.admin)
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    assert (await client.get("/v1/me", headers=headers)).status_code == 401


async def test_last_used_at_is_recorded(client: httpx.AsyncClient, tenant: Tenant) -> None:
    await client.get("/v1/me", headers=tenant.admin)
    keys = (await client.get("/v1/api-keys", headers=tenant.admin)).json()["data"]
    assert keys[0]["last_used_at"] is not None


async def test_members_cannot_manage_keys(client: httpx.AsyncClient, tenant: Tenant) -> None:
    member = await member_headers(client, tenant)
    admin_key_id = (await client.get("/v1/me", headers=tenant.admin)).json()["api_key_id"]
    for method, url, body in (
        ("POST", "/v1/api-keys", {"name": "x"}),
        ("GET", "/v1/api-keys", None),
        ("POST", f"/v1/api-keys/{admin_key_id}/revoke", None),
    ):
        response = await client.request(method, url, json=body, headers=member)
        assert response.status_code == 403, (method, url)
        assert response.json()["error"] == "PermissionDenied"
    assert (await client.get("/v1/me", headers=tenant.admin)).status_code == 200


async def test_api_key_list_is_paginated(client: httpx.AsyncClient, tenant: Tenant) -> None:
    for i in range(4):
        await client.post("/v1/api-keys", json={"name": f"k{i}"}, headers=tenant.admin)
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await client.get("/v1/api-keys", params=params, headers=tenant.admin)).json()
        assert len(page["data"]) <= 2
        seen += [k["name"] for k in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["first admin key", "k0", "k1", "k2", "k3"]
