from typing import Any

import httpx

from tests.conftest import MakeTenant, Tenant, member_headers


async def an_agent(client: httpx.AsyncClient, tenant: Tenant, slug: str = "writer") -> dict[str, Any]:
    response = await client.post("/v1/agents", json={"name": "Writer", "slug": slug}, headers=tenant.admin)
    agent: dict[str, Any] = response.json()
    return agent


def template(agent_id: str, **fields: object) -> dict[str, Any]:
    return {
        "name": "release-notes",
        "description": "Write release notes",
        "agent_id": agent_id,
        "arguments": [
            {"name": "version", "required": True},
            {"name": "areas", "type": "array", "default": ["api"]},
        ],
        "messages": [
            {"role": "system", "content": "You write crisp notes."},
            {"role": "user", "content": 'Notes for {version} covering {areas}. Keep {"json": true} and {unknown}.'},
        ],
    } | fields


async def test_admins_manage_templates_and_anyone_renders_them(client: httpx.AsyncClient, tenant: Tenant) -> None:
    agent = await an_agent(client, tenant)
    created = await client.post("/v1/prompt-templates", json=template(agent["id"]), headers=tenant.admin)
    assert created.status_code == 201, created.text
    assert created.json()["tool_name"] == "release_notes" and created.json()["source"] == "api"

    member = await member_headers(client, tenant)
    listed = (await client.get("/v1/prompt-templates", headers=member)).json()["data"]
    assert [t["name"] for t in listed] == ["release-notes"]
    rendered = await client.post(
        "/v1/prompt-templates/release-notes/render", json={"arguments": {"version": "2.0"}}, headers=member
    )
    assert rendered.json()["messages"] == [
        {"role": "system", "content": "You write crisp notes."},
        {"role": "user", "content": 'Notes for 2.0 covering api. Keep {"json": true} and {unknown}.'},
    ]
    arrays = await client.post(
        "/v1/prompt-templates/release-notes/render",
        json={"arguments": {"version": "{areas}", "areas": ["api", "cli"]}},
        headers=member,
    )
    assert arrays.json()["messages"][1]["content"].startswith("Notes for {areas} covering api, cli.")
    missing = await client.post("/v1/prompt-templates/release-notes/render", json={}, headers=member)
    assert missing.status_code == 422 and "version" in missing.json()["detail"]

    assert (
        await client.post("/v1/prompt-templates", json=template(agent["id"], name="x"), headers=member)
    ).status_code == 403
    patched = await client.patch(
        "/v1/prompt-templates/release-notes",
        json={"name": "changelog", "description": "Write a changelog"},
        headers=tenant.admin,
    )
    assert patched.status_code == 200 and patched.json()["name"] == "changelog"
    assert (await client.get("/v1/prompt-templates/release-notes", headers=tenant.admin)).status_code == 404
    assert (await client.delete("/v1/prompt-templates/changelog", headers=member)).status_code == 403
    assert (await client.delete("/v1/prompt-templates/changelog", headers=tenant.admin)).status_code == 204
    assert (await client.get("/v1/prompt-templates", headers=tenant.admin)).json()["data"] == []


async def test_template_input_is_checked(client: httpx.AsyncClient, tenant: Tenant) -> None:
    agent = await an_agent(client, tenant)
    await client.post("/v1/prompt-templates", json=template(agent["id"]), headers=tenant.admin)
    cases = [
        (template(agent["id"]), 409),
        (template(agent["id"], name="writer"), 409),
        (template(agent["id"], name="release_notes"), 409),
        (template(agent["id"], name="bad name"), 422),
        (template(agent["id"], name="ok", messages=[]), 422),
        (template(agent["id"], name="ok", messages=[{"role": "robot", "content": "x"}]), 422),
        (template(agent["id"], name="ok", arguments=[{"name": "a"}, {"name": "a"}]), 422),
        (template(agent["id"], name="ok", arguments=[{"name": "1x"}]), 422),
        (template("00000000-0000-7000-8000-000000000000", name="ok"), 422),
        (template(agent["id"], name="ok", extra=1), 422),
    ]
    for body, status in cases:
        response = await client.post("/v1/prompt-templates", json=body, headers=tenant.admin)
        assert response.status_code == status, (body, response.text)


async def test_templates_stay_within_their_organization(client: httpx.AsyncClient, make_tenant: MakeTenant) -> None:
    owner, intruder = await make_tenant(), await make_tenant()
    agent = await an_agent(client, owner)
    await client.post("/v1/prompt-templates", json=template(agent["id"]), headers=owner.admin)
    for method, path, body in (
        ("GET", "/v1/prompt-templates/release-notes", None),
        ("PATCH", "/v1/prompt-templates/release-notes", {"description": "hijacked"}),
        ("DELETE", "/v1/prompt-templates/release-notes", None),
        ("POST", "/v1/prompt-templates/release-notes/render", {"arguments": {"version": "1"}}),
    ):
        response = await client.request(method, path, json=body, headers=intruder.admin)
        assert response.status_code == 404, (method, path)
    assert (await client.get("/v1/prompt-templates", headers=intruder.admin)).json()["data"] == []
    other = await an_agent(client, intruder)
    cross = await client.post("/v1/prompt-templates", json=template(agent["id"], name="mine"), headers=intruder.admin)
    assert cross.status_code == 422 and other["id"] != agent["id"]
    kept = (await client.get("/v1/prompt-templates/release-notes", headers=owner.admin)).json()
    assert kept["description"] == "Write release notes"
