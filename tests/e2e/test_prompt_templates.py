from typing import Any

import httpx
import pytest

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


@pytest.fixture
async def release_notes(client: httpx.AsyncClient, tenant: Tenant) -> httpx.Response:
    """The answer to an admin creating the template release-notes."""
    agent = await an_agent(client, tenant)
    return await client.post("/v1/prompt-templates", json=template(agent["id"]), headers=tenant.admin)


async def render(client: httpx.AsyncClient, headers: dict[str, str], **arguments: object) -> httpx.Response:
    body = {"arguments": arguments} if arguments else {}
    return await client.post("/v1/prompt-templates/release-notes/render", json=body, headers=headers)


async def test_an_admin_creates_a_template_published_as_a_tool(release_notes: httpx.Response) -> None:
    assert release_notes.status_code == 201, release_notes.text
    assert release_notes.json()["tool_name"] == "release_notes" and release_notes.json()["source"] == "api"


async def test_members_list_the_templates(
    client: httpx.AsyncClient, tenant: Tenant, release_notes: httpx.Response
) -> None:
    listed = (await client.get("/v1/prompt-templates", headers=await member_headers(client, tenant))).json()
    assert [t["name"] for t in listed["data"]] == ["release-notes"]


async def test_members_render_a_template_with_its_defaults_and_other_braces_kept(
    client: httpx.AsyncClient, tenant: Tenant, release_notes: httpx.Response
) -> None:
    rendered = await render(client, await member_headers(client, tenant), version="2.0")
    assert rendered.json()["messages"] == [
        {"role": "system", "content": "You write crisp notes."},
        {"role": "user", "content": 'Notes for 2.0 covering api. Keep {"json": true} and {unknown}.'},
    ]


async def test_an_array_argument_is_rendered_as_a_list_and_values_are_not_rendered_again(
    client: httpx.AsyncClient, tenant: Tenant, release_notes: httpx.Response
) -> None:
    arrays = await render(client, await member_headers(client, tenant), version="{areas}", areas=["api", "cli"])
    assert arrays.json()["messages"][1]["content"].startswith("Notes for {areas} covering api, cli.")


async def test_a_required_argument_left_out_is_refused(
    client: httpx.AsyncClient, tenant: Tenant, release_notes: httpx.Response
) -> None:
    missing = await render(client, await member_headers(client, tenant))
    assert missing.status_code == 422 and "version" in missing.json()["detail"]


def draft(**changes: object) -> dict[str, Any]:
    """A template being written: its arguments and messages, not saved."""
    return {key: value for key, value in template("unused").items() if key in ("arguments", "messages")} | changes


async def test_a_draft_renders_as_the_saved_template_would_and_nothing_is_saved(
    client: httpx.AsyncClient, tenant: Tenant, release_notes: httpx.Response
) -> None:
    member = await member_headers(client, tenant)
    for version in ("2.0", "{areas}"):
        body = {"template": draft(), "arguments": {"version": version, "areas": ["api", "cli"]}}
        previewed = await client.post("/v1/prompt-templates/preview", json=body, headers=member)
        assert previewed.status_code == 200, previewed.text
        saved = await render(client, member, version=version, areas=["api", "cli"])
        assert previewed.json() == saved.json()
    listed = (await client.get("/v1/prompt-templates", headers=member)).json()["data"]
    assert [t["name"] for t in listed] == ["release-notes"]


async def test_a_draft_renders_its_unsaved_edits(client: httpx.AsyncClient, tenant: Tenant) -> None:
    edited = draft(
        arguments=[{"name": "version", "required": True}, {"name": "tone", "default": "calm"}],
        messages=[{"role": "user", "content": "Notes for {version}, {tone}."}],
    )
    body = {"template": edited, "arguments": {"version": "3.1"}}
    previewed = await client.post("/v1/prompt-templates/preview", json=body, headers=tenant.admin)
    assert previewed.json()["messages"] == [{"role": "user", "content": "Notes for 3.1, calm."}]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"template": draft()}, "version"),
        ({"template": draft(arguments=[{"name": "a"}, {"name": "a"}]), "arguments": {}}, "unique"),
        ({"template": draft(messages=[])}, "messages"),
        ({"template": draft(), "arguments": {"version": 1}}, "version"),
        ({"template": draft(name="x"), "arguments": {"version": "1"}}, "name"),
    ],
    ids=["required argument missing", "argument twice", "no message", "value not text", "unknown field"],
)
async def test_a_draft_that_cannot_render_is_refused_in_words(
    client: httpx.AsyncClient, tenant: Tenant, body: dict[str, Any], says: str
) -> None:
    refused = await client.post("/v1/prompt-templates/preview", json=body, headers=tenant.admin)
    assert refused.status_code == 422, refused.text
    assert says in refused.json()["detail"]


async def test_members_cannot_create_or_delete_templates(
    client: httpx.AsyncClient, tenant: Tenant, release_notes: httpx.Response
) -> None:
    member = await member_headers(client, tenant)
    agent_id = release_notes.json()["agent_id"]
    assert (
        await client.post("/v1/prompt-templates", json=template(agent_id, name="x"), headers=member)
    ).status_code == 403
    assert (await client.delete("/v1/prompt-templates/release-notes", headers=member)).status_code == 403


async def test_an_admin_renames_a_template(
    client: httpx.AsyncClient, tenant: Tenant, release_notes: httpx.Response
) -> None:
    patched = await client.patch(
        "/v1/prompt-templates/release-notes",
        json={"name": "changelog", "description": "Write a changelog"},
        headers=tenant.admin,
    )
    assert patched.status_code == 200 and patched.json()["name"] == "changelog"
    assert (await client.get("/v1/prompt-templates/release-notes", headers=tenant.admin)).status_code == 404


async def test_an_admin_deletes_a_template(
    client: httpx.AsyncClient, tenant: Tenant, release_notes: httpx.Response
) -> None:
    assert (await client.delete("/v1/prompt-templates/release-notes", headers=tenant.admin)).status_code == 204
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
