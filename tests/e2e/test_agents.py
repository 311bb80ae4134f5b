from typing import Any

import httpx

from tests.conftest import MakeTenant, Tenant, member_headers


async def create_agent(client: httpx.AsyncClient, tenant: Tenant, **fields: object) -> dict[str, Any]:
    response = await client.post("/v1/agents", json={"name": "Support Bot"} | fields, headers=tenant.admin)
    assert response.status_code == 201, response.text
    agent: dict[str, Any] = response.json()
    return agent


async def test_create_get_update_delete_an_agent(client: httpx.AsyncClient, tenant: Tenant) -> None:
    agent = await create_agent(
        client,
        tenant,
        description="Answers support questions",
        instructions="Be kind.",
        model="gpt-test",
        model_settings={"temperature": 0.2, "max_tokens": 500},
        tools=[{"type": "source_query"}, {"type": "command", "config": {"name": "git-status"}}],
        max_steps=5,
        parallel_tool_calls=False,
        publish_as_mcp=True,
    )
    assert agent["slug"] == "support-bot"
    assert agent["model_settings"] == {"temperature": 0.2, "max_tokens": 500}
    assert agent["max_steps"] == 5 and agent["parallel_tool_calls"] is False and agent["publish_as_mcp"] is True

    fetched = await client.get(f"/v1/agents/{agent['id']}", headers=tenant.admin)
    assert fetched.json() == agent

    patched = await client.patch(
        f"/v1/agents/{agent['id']}", json={"instructions": "Be brief.", "max_steps": 7}, headers=tenant.admin
    )
    assert patched.status_code == 200
    assert patched.json()["instructions"] == "Be brief."
    assert patched.json()["max_steps"] == 7
    assert patched.json()["name"] == "Support Bot"
    assert patched.json()["tools"] == agent["tools"]

    assert (await client.delete(f"/v1/agents/{agent['id']}", headers=tenant.admin)).status_code == 204
    assert (await client.get(f"/v1/agents/{agent['id']}", headers=tenant.admin)).status_code == 404


async def test_agents_get_the_default_model(client: httpx.AsyncClient, tenant: Tenant) -> None:
    agent = await create_agent(client, tenant)
    assert agent["model"] == "threadline-offline"
    assert agent["max_steps"] == 20 and agent["parallel_tool_calls"] is True


async def test_slugs_are_unique_per_organization(client: httpx.AsyncClient, make_tenant: MakeTenant) -> None:
    first, second = await make_tenant(), await make_tenant()
    await create_agent(client, first, slug="helper")
    duplicate = await client.post("/v1/agents", json={"name": "Other", "slug": "helper"}, headers=first.admin)
    assert duplicate.status_code == 409
    assert duplicate.json()["error"] == "SlugTaken"
    await create_agent(client, second, slug="helper")

    other = await create_agent(client, first, slug="other")
    clash = await client.patch(f"/v1/agents/{other['id']}", json={"slug": "helper"}, headers=first.admin)
    assert clash.status_code == 409
    assert (await client.get(f"/v1/agents/{other['id']}", headers=first.admin)).json()["slug"] == "other"


async def test_members_may_manage_agents(client: httpx.AsyncClient, tenant: Tenant) -> None:
    member = await member_headers(client, tenant)
    response = await client.post("/v1/agents", json={"name": "Mine"}, headers=member)
    assert response.status_code == 201


async def test_sub_agents_must_exist_and_are_unlinked_when_deleted(client: httpx.AsyncClient, tenant: Tenant) -> None:
    helper = await create_agent(client, tenant, name="Helper")
    boss = await create_agent(client, tenant, name="Boss", sub_agent_ids=[helper["id"]])
    assert boss["sub_agent_ids"] == [helper["id"]]

    missing = await client.post(
        "/v1/agents",
        json={"name": "Bad", "sub_agent_ids": ["00000000-0000-7000-8000-000000000000"]},
        headers=tenant.admin,
    )
    assert missing.status_code == 422
    assert missing.json()["error"] == "InvalidReference"

    itself = await client.patch(f"/v1/agents/{boss['id']}", json={"sub_agent_ids": [boss["id"]]}, headers=tenant.admin)
    assert itself.status_code == 422

    await client.delete(f"/v1/agents/{helper['id']}", headers=tenant.admin)
    assert (await client.get(f"/v1/agents/{boss['id']}", headers=tenant.admin)).json()["sub_agent_ids"] == []


async def test_agent_list_pages_through_everything_once(client: httpx.AsyncClient, tenant: Tenant) -> None:
    ids = [(await create_agent(client, tenant, name=f"Agent {i}"))["id"] for i in range(5)]
    seen, cursor = [], None
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await client.get("/v1/agents", params=params, headers=tenant.admin)).json()
        seen += [a["id"] for a in page["data"]]
        if not (cursor := page["next_cursor"]):
            break
    assert seen == ids


async def test_bad_agent_input_gets_a_clear_4xx(client: httpx.AsyncClient, tenant: Tenant) -> None:
    cases = [
        ({"name": ""}, 422),
        ({"name": "x" * 201}, 422),
        ({"name": 42}, 422),
        ({"name": "ok", "unknown": True}, 422),
        ({"name": "ok", "max_steps": 0}, 422),
        ({"name": "ok", "max_steps": 101}, 422),
        ({"name": "ok", "max_steps": "5"}, 422),
        ({"name": "ok", "max_steps": 5.5}, 422),
        ({"name": "ok", "slug": "Not A Slug"}, 422),
        ({"name": "ok", "model_settings": {"temperature": 3}}, 422),
        ({"name": "ok", "model_settings": {"colour": "red"}}, 422),
        ({"name": "ok", "tools": [{"type": "mcp_tool"}]}, 422),
        ({"name": "ok", "tools": [{"type": "teleport"}]}, 422),
        ({"name": "ok", "tools": [{"type": "command"}]}, 422),
        ({"name": "ok", "tools": [{"type": "source_query"}, {"type": "source_query"}]}, 422),
        ({"name": "ok", "parallel_tool_calls": "yes"}, 422),
        ({"name": "ok", "mcp_integration_ids": ["not-a-uuid"]}, 422),
        ([1, 2, 3], 422),
    ]
    for body, status in cases:
        response = await client.post("/v1/agents", json=body, headers=tenant.admin)
        assert response.status_code == status, (body, response.text)
        assert set(response.json()) == {"error", "detail"}
        assert response.json()["detail"]

    malformed = await client.post(
        "/v1/agents", content=b'{"name": ', headers=tenant.admin | {"content-type": "application/json"}
    )
    assert malformed.status_code == 400
    assert malformed.json()["error"] == "InvalidJson"

    listed = (await client.get("/v1/agents", headers=tenant.admin)).json()
    assert listed["data"] == []


async def test_bad_updates_leave_the_agent_unchanged(client: httpx.AsyncClient, tenant: Tenant) -> None:
    agent = await create_agent(client, tenant)
    for body in ({"name": None}, {"max_steps": 1000}, {"tools": [{"type": "client"}]}, {"nope": 1}):
        response = await client.patch(f"/v1/agents/{agent['id']}", json=body, headers=tenant.admin)
        assert response.status_code == 422, body
    assert (await client.get(f"/v1/agents/{agent['id']}", headers=tenant.admin)).json() == agent


async def test_list_parameters_are_checked(client: httpx.AsyncClient, tenant: Tenant) -> None:
    assert (await client.get("/v1/agents?limit=0", headers=tenant.admin)).status_code == 422
    assert (await client.get("/v1/agents?limit=101", headers=tenant.admin)).status_code == 422
    bad_cursor = await client.get("/v1/agents?cursor=garbage", headers=tenant.admin)
    assert bad_cursor.status_code == 400
    assert bad_cursor.json()["error"] == "InvalidCursor"
    assert (await client.get("/v1/agents/not-a-uuid", headers=tenant.admin)).status_code == 422


CHATMD = (
    '<config model="gpt-test"/>\n<meta description="Reads web pages for people."/>\n'
    "<system>You read web pages for people. Quote them.</system>\n"
    '<tool name="webpage_to_markdown"/>\n<tool name="apply_patch"/>\n<user>Read {url}</user>\n'
)


async def import_chatmd(
    client: httpx.AsyncClient, headers: dict[str, str], content: str = CHATMD, **fields: object
) -> httpx.Response:
    body = {"file_name": "web-helper.chatmd", "content": content} | fields
    return await client.post("/v1/agents/import", json=body, headers=headers)


async def test_a_chatmd_document_is_imported_as_the_command_line_imports_it(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    imported = await import_chatmd(client, await member_headers(client, tenant))
    assert imported.status_code == 201, imported.text
    agent = imported.json()["agent"]
    assert (agent["name"], agent["slug"], agent["model"]) == ("web-helper", "web-helper", "gpt-test")
    assert agent["instructions"] == "You read web pages for people. Quote them."
    assert agent["description"] == "Reads web pages for people."
    assert [t["type"] for t in agent["tools"]] == ["website_content"]
    warnings = imported.json()["warnings"]
    assert any("'apply_patch' has no Threadline counterpart" in w for w in warnings)
    assert any("<user>/<assistant> message(s) were left out" in w for w in warnings)
    assert (await client.get(f"/v1/agents/{agent['id']}", headers=tenant.admin)).json() == agent


async def test_a_dry_run_says_what_the_agent_would_be_and_creates_nothing(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    previewed = await import_chatmd(client, tenant.admin, dry_run=True, model="gpt-other")
    assert previewed.status_code == 200, previewed.text
    assert previewed.json()["agent"] is None
    assert previewed.json()["file"] == {
        "name": "web-helper",
        "slug": "web-helper",
        "description": "Reads web pages for people.",
        "instructions": "You read web pages for people. Quote them.",
        "model": "gpt-test",
        "tools": [{"type": "website_content", "config": {}}],
    }
    assert (await client.get("/v1/agents", headers=tenant.admin)).json()["data"] == []


async def test_the_model_given_overrides_the_files(client: httpx.AsyncClient, tenant: Tenant) -> None:
    imported = await import_chatmd(client, tenant.admin, model="gpt-other")
    assert imported.json()["agent"]["model"] == "gpt-other"


async def test_a_document_that_defines_no_agent_is_refused_with_its_lines(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    refused = await import_chatmd(client, tenant.admin, content="<system>unclosed\n")
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == "InvalidAgentFile"
    assert "web-helper.chatmd:1" in refused.json()["detail"]
    assert (await client.get("/v1/agents", headers=tenant.admin)).json()["data"] == []
    for body in ({"file_name": "", "content": CHATMD}, {"file_name": "x.chatmd"}, {"content": CHATMD}):
        assert (await client.post("/v1/agents/import", json=body, headers=tenant.admin)).status_code == 422
