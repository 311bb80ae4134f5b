"""MCP integrations over the HTTP API, against a real MCP server (built with the SDK) on loopback."""

import base64
import logging
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import httpx
import pytest

from domain.ids import IntegrationId, OrgId
from infrastructure.container import Container
from tests.conftest import MakeTenant, Tenant, as_port, member_headers
from tests.fakes.mcp_server import PNG, FakeMcpServer

TOKEN = "s3cret-token-abcdef-1234"


@pytest.fixture(scope="module")
async def mcp_server() -> AsyncIterator[FakeMcpServer]:
    async with FakeMcpServer(page_size=2, token=TOKEN) as server:
        yield server


async def create_integration(client: httpx.AsyncClient, tenant: Tenant, url: str, **fields: object) -> dict[str, Any]:
    body = {"name": "Memo Server", "url": url, "auth_type": "bearer", "credentials": TOKEN} | fields
    response = await client.post("/v1/mcp-integrations", json=body, headers=tenant.admin)
    assert response.status_code == 201, response.text
    integration: dict[str, Any] = response.json()
    return integration


def base(integration: dict[str, Any]) -> str:
    return f"/v1/mcp-integrations/{integration['id']}"


async def test_credentials_are_stored_encrypted_and_never_returned(
    client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer, container: Container
) -> None:
    integration = await create_integration(client, tenant, mcp_server.url)
    assert integration["slug"] == "memo-server"
    assert integration["credentials"] == {"set": True, "last4": "1234"}
    listed = await client.get("/v1/mcp-integrations", headers=tenant.admin)
    fetched = await client.get(base(integration), headers=tenant.admin)
    for response in (listed, fetched):
        assert TOKEN not in response.text
    async with as_port(container.uow()).read_only() as uow:
        stored = await uow.integrations.get(OrgId(UUID(tenant.id)), IntegrationId(UUID(integration["id"])))
    assert stored is not None and stored.credentials is not None
    assert TOKEN not in stored.credentials.ciphertext


async def test_a_connection_test_describes_the_server_and_records_the_outcome(
    client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer
) -> None:
    integration = await create_integration(client, tenant, mcp_server.url)
    assert integration["connection_status"] == "unknown"
    test = (await client.post(f"{base(integration)}/test", headers=tenant.admin)).json()
    assert test["ok"] is True and test["error"] is None
    server = test["server"]
    assert (server["name"], server["version"]) == ("fake-mcp", "1.2.3")
    assert server["protocol_version"] == "2026-07-28"
    assert (server["tools"], server["resources"], server["resource_templates"], server["prompts"]) == (
        8,
        3,
        1,
        3,
    )
    assert "tools" in server["capabilities"]
    after = (await client.get(base(integration), headers=tenant.admin)).json()
    assert after["connection_status"] == "connected" and after["last_checked_at"] is not None


async def test_wrong_credentials_fail_the_test_without_revealing_them(
    client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-token-zyxwvu-9876"
    integration = await create_integration(client, tenant, mcp_server.url, credentials=wrong)
    test = await client.post(f"{base(integration)}/test", headers=tenant.admin)
    assert test.status_code == 200
    body = test.json()
    assert body["ok"] is False and body["error"]["error"] == "McpAuthFailed"
    after = (await client.get(base(integration), headers=tenant.admin)).json()
    assert after["connection_status"] == "failed" and "credentials" in after["last_error"]

    call = await client.post(f"{base(integration)}/tools/echo/call", json={"arguments": {}}, headers=tenant.admin)
    assert call.status_code == 502 and call.json()["error"] == "McpAuthFailed"
    for text in (test.text, call.text, caplog.text):
        assert wrong not in text and TOKEN not in text


async def test_catalogs_follow_every_page_and_apply_the_tool_filter(
    client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer
) -> None:
    integration = await create_integration(client, tenant, mcp_server.url)
    tools = (await client.get(f"{base(integration)}/tools", headers=tenant.admin)).json()["data"]
    assert [t["name"] for t in tools][:7] == ["echo", "add", "fail", "picture", "hang", "grow", "stats"]
    assert tools[1]["input_schema"]["properties"]["a"] == {"type": "number"}
    resources = (await client.get(f"{base(integration)}/resources", headers=tenant.admin)).json()["data"]
    assert {r["uri"] for r in resources} == {"memo://notes", "memo://people.csv", "memo://logo.png"}
    templates = (await client.get(f"{base(integration)}/resource-templates", headers=tenant.admin)).json()["data"]
    assert templates == [
        {"uri_template": "memo://items/{id}", "name": "Item", "description": None, "mime_type": "text/plain"}
    ]
    prompts = (await client.get(f"{base(integration)}/prompts", headers=tenant.admin)).json()["data"]
    assert [p["name"] for p in prompts] == ["greet", "plan-trip", "welcome"]
    assert prompts[1]["arguments"][0] == {"name": "city", "description": "Destination", "required": True}

    only = await create_integration(
        client, tenant, mcp_server.url, slug="only", tool_filter={"mode": "include", "names": ["echo", "add"]}
    )
    names = [t["name"] for t in (await client.get(f"{base(only)}/tools", headers=tenant.admin)).json()["data"]]
    assert names == ["echo", "add"]
    excluded = await create_integration(
        client, tenant, mcp_server.url, slug="most", tool_filter={"mode": "exclude", "names": ["hang"]}
    )
    names = [t["name"] for t in (await client.get(f"{base(excluded)}/tools", headers=tenant.admin)).json()["data"]]
    assert "hang" not in names and "echo" in names
    refused = await client.post(f"{base(excluded)}/tools/hang/call", json={}, headers=tenant.admin)
    assert refused.status_code == 404 and refused.json()["error"] == "McpToolNotFound"


async def test_members_call_tools_directly(
    client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer
) -> None:
    integration = await create_integration(client, tenant, mcp_server.url)
    member = await member_headers(client, tenant)

    async def call(name: str, arguments: dict[str, Any] | None = None) -> httpx.Response:
        return await client.post(
            f"{base(integration)}/tools/{name}/call", json={"arguments": arguments or {}}, headers=member
        )

    echo = (await call("echo", {"message": "hi"})).json()
    assert echo == {
        "is_error": False,
        "text": "Echo: hi",
        "content": [{"type": "text", "text": "Echo: hi", "data": None, "mime_type": None, "uri": None, "name": None}],
        "structured_content": None,
    }
    assert (await call("add", {"a": 2, "b": 3})).json()["text"] == "5"
    failed = (await call("fail")).json()
    assert failed["is_error"] is True and failed["text"] == "it broke"
    picture = (await call("picture")).json()
    assert picture["text"] == "a dot\n[image: image/png]"
    assert base64.b64decode(picture["content"][1]["data"]) == PNG
    stats = (await call("stats")).json()
    assert stats["structured_content"] == {"count": 3, "ok": True}
    assert stats["text"] == '{"count": 3, "ok": true}'
    missing = await call("nope")
    assert missing.status_code == 404 and missing.json()["error"] == "McpToolNotFound"


async def read_resource(
    client: httpx.AsyncClient, tenant: Tenant, integration: dict[str, Any], uri: str, **body: Any
) -> httpx.Response:
    return await client.post(f"{base(integration)}/resources/read", json={"uri": uri} | body, headers=tenant.admin)


@pytest.fixture
async def memo(client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer) -> dict[str, Any]:
    return await create_integration(client, tenant, mcp_server.url)


async def test_a_text_resource_is_read(client: httpx.AsyncClient, tenant: Tenant, memo: dict[str, Any]) -> None:
    read = (await read_resource(client, tenant, memo, "memo://notes")).json()
    assert read["data"][0]["text"].startswith("Remember the milk.")


async def test_a_blob_resource_is_read_in_base64(
    client: httpx.AsyncClient, tenant: Tenant, memo: dict[str, Any]
) -> None:
    blob = (await read_resource(client, tenant, memo, "memo://logo.png")).json()
    assert base64.b64decode(blob["data"][0]["blob"]) == PNG


async def test_a_resource_of_a_template_is_read(
    client: httpx.AsyncClient, tenant: Tenant, memo: dict[str, Any]
) -> None:
    templated = (await read_resource(client, tenant, memo, "memo://items/7")).json()
    assert templated["data"][0]["text"] == "Item 7"


async def test_a_resource_the_server_does_not_have_is_not_found(
    client: httpx.AsyncClient, tenant: Tenant, memo: dict[str, Any]
) -> None:
    missing = await read_resource(client, tenant, memo, "memo://nope")
    assert missing.status_code == 404 and missing.json()["error"] == "McpResourceNotFound"


IMPORTED = ("memo://notes", "memo://people.csv", "memo://logo.png")
Imported = tuple[list[httpx.Response], list[dict[str, Any]]]
"""The answers to the imports, and the thread's sources."""


@pytest.fixture
async def imported(client: httpx.AsyncClient, tenant: Tenant, memo: dict[str, Any]) -> Imported:
    """A text, a CSV and an image resource imported into a new thread: the answers, and the thread's sources."""
    thread = (await client.post("/v1/threads", json={}, headers=tenant.admin)).json()
    answers = [
        await read_resource(client, tenant, memo, uri, thread_id=thread["id"], **{"import": True}) for uri in IMPORTED
    ]
    sources: list[dict[str, Any]] = (
        await client.get(f"/v1/threads/{thread['id']}/sources", headers=tenant.admin)
    ).json()["data"]
    return answers, sources


async def test_an_imported_resource_says_where_it_came_from(memo: dict[str, Any], imported: Imported) -> None:
    answers, _ = imported
    assert [a.status_code for a in answers] == [200, 200, 200], [a.text for a in answers]
    assert [a.json()["sources"][0]["origin"] for a in answers] == [
        {"type": "mcp_resource", "integration_id": memo["id"], "uri": uri} for uri in IMPORTED
    ]


async def test_imported_resources_become_sources_of_the_thread(
    imported: Imported,
) -> None:
    _, sources = imported
    assert [(s["name"], s["kind"], s["mime_type"]) for s in sources] == [
        ("Notes", "text", "text/plain"),
        ("People", "data", "text/csv"),
        ("Logo", "blob", "image/png"),
    ]
    assert sources[2]["size"] == len(PNG)


async def test_an_imported_text_resource_keeps_its_text(
    client: httpx.AsyncClient, tenant: Tenant, imported: Imported
) -> None:
    notes = (await client.get(f"/v1/sources/{imported[1][0]['id']}", headers=tenant.admin)).json()
    assert notes["text"].startswith("Remember the milk.")


async def test_an_imported_csv_resource_becomes_a_table(
    client: httpx.AsyncClient, tenant: Tenant, imported: Imported
) -> None:
    people = (await client.get(f"/v1/sources/{imported[1][1]['id']}", headers=tenant.admin)).json()
    assert people["data"] == {
        "headers": ["name", "city"],
        "rows": [["Ada", "London"], ["Grace", "Arlington"]],
    }


async def test_an_imported_image_resource_is_served_as_it_was(
    client: httpx.AsyncClient, tenant: Tenant, imported: Imported
) -> None:
    logo = await client.get(f"/v1/sources/{imported[1][2]['id']}/content", headers=tenant.admin)
    assert logo.content == PNG and logo.headers["content-type"] == "image/png"


async def test_an_import_needs_a_thread(client: httpx.AsyncClient, tenant: Tenant, memo: dict[str, Any]) -> None:
    no_thread = await read_resource(client, tenant, memo, "memo://notes", **{"import": True})
    assert no_thread.status_code == 422


async def test_prompts_are_rendered_as_text(
    client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer
) -> None:
    integration = await create_integration(client, tenant, mcp_server.url)
    greet = await client.post(
        f"{base(integration)}/prompts/greet/get", json={"arguments": {"name": "Ada"}}, headers=tenant.admin
    )
    assert greet.json() == {
        "description": "Greets someone",
        "messages": [{"role": "user", "content": "Say hello to Ada."}],
    }
    trip = (
        await client.post(
            f"{base(integration)}/prompts/plan-trip/get",
            json={"arguments": {"city": "Rome"}},
            headers=tenant.admin,
        )
    ).json()
    assert trip["messages"] == [
        {"role": "user", "content": "Plan 3 days in Rome."},
        {"role": "assistant", "content": "[image: image/png]"},
    ]
    missing = await client.post(f"{base(integration)}/prompts/nope/get", json={}, headers=tenant.admin)
    assert missing.status_code == 404 and missing.json()["error"] == "McpPromptNotFound"


async def test_disabled_integrations_refuse_use_until_enabled(
    client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer
) -> None:
    integration = await create_integration(client, tenant, mcp_server.url)
    disabled = await client.post(f"{base(integration)}/disable", headers=tenant.admin)
    assert disabled.json()["enabled"] is False
    for method, path, body in (
        ("GET", "/tools", None),
        ("POST", "/tools/echo/call", {}),
        ("POST", "/resources/read", {"uri": "memo://notes"}),
        ("POST", "/prompts/welcome/get", {}),
    ):
        response = await client.request(method, base(integration) + path, json=body, headers=tenant.admin)
        assert response.status_code == 409, path
        assert response.json()["error"] == "McpIntegrationDisabled"
    await client.post(f"{base(integration)}/enable", headers=tenant.admin)
    assert (await client.post(f"{base(integration)}/tools/echo/call", json={}, headers=tenant.admin)).status_code == 200


async def test_updating_credentials_takes_effect_at_once(
    client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer
) -> None:
    integration = await create_integration(client, tenant, mcp_server.url)
    assert (await client.post(f"{base(integration)}/tools/echo/call", json={}, headers=tenant.admin)).status_code == 200
    patched = await client.patch(base(integration), json={"credentials": "not-the-token-0000"}, headers=tenant.admin)
    assert patched.json()["credentials"] == {"set": True, "last4": "0000"}
    refused = await client.post(f"{base(integration)}/tools/echo/call", json={}, headers=tenant.admin)
    assert refused.status_code == 502 and refused.json()["error"] == "McpAuthFailed"
    await client.patch(base(integration), json={"credentials": TOKEN}, headers=tenant.admin)
    assert (await client.post(f"{base(integration)}/tools/echo/call", json={}, headers=tenant.admin)).status_code == 200


async def test_integration_input_is_checked(
    client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer
) -> None:
    cases = [
        {"name": "x", "transport": "stdio", "server": "not-defined"},
        {"name": "x", "transport": "stdio", "server": "everything", "url": mcp_server.url},
        {"name": "x", "transport": "stdio"},
        {"name": "x"},
        {"name": "x", "url": "ftp://example.org"},
        {"name": "x", "url": "http://10.1.2.3/mcp"},
        {"name": "x", "url": "http://169.254.169.254/latest"},
        {"name": "x", "url": "http://user:pw@127.0.0.1:1/mcp"},
        {"name": "x", "url": mcp_server.url, "auth_type": "bearer"},
        {"name": "x", "url": mcp_server.url, "auth_type": "header", "credentials": "abc"},
        {
            "name": "x",
            "url": mcp_server.url,
            "auth_type": "header",
            "auth_header_name": "bad header",
            "credentials": "a",
        },
        {"name": "x", "url": mcp_server.url, "credentials": "abc"},
        {"name": "x", "url": mcp_server.url, "timeout_seconds": 0},
        {"name": "x", "url": mcp_server.url, "tool_filter": {"mode": "all", "names": ["echo"]}},
        {"name": "x", "url": mcp_server.url, "transport": "carrier-pigeon"},
        {"name": "x", "url": mcp_server.url, "slug": "a" * 33},
        {"name": "x", "url": mcp_server.url, "unknown": 1},
    ]
    for body in cases:
        response = await client.post("/v1/mcp-integrations", json=body, headers=tenant.admin)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["detail"]
    assert (await client.get("/v1/mcp-integrations", headers=tenant.admin)).json()["data"] == []
    first = await create_integration(client, tenant, mcp_server.url, slug="same")
    again = await client.post(
        "/v1/mcp-integrations",
        json={"name": "y", "slug": "same", "url": mcp_server.url},
        headers=tenant.admin,
    )
    assert again.status_code == 409
    assert (await client.patch(base(first), json={"url": "http://10.0.0.1/"}, headers=tenant.admin)).status_code == 422


async def test_members_may_read_but_not_manage(
    client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer
) -> None:
    integration = await create_integration(client, tenant, mcp_server.url)
    member = await member_headers(client, tenant)
    assert (await client.get("/v1/mcp-integrations", headers=member)).status_code == 200
    assert (await client.get(base(integration), headers=member)).status_code == 200
    for method, path, body in (
        ("POST", "/v1/mcp-integrations", {"name": "m", "url": mcp_server.url}),
        ("PATCH", base(integration), {"name": "renamed"}),
        ("POST", f"{base(integration)}/disable", None),
        ("POST", f"{base(integration)}/enable", None),
        ("DELETE", base(integration), None),
    ):
        response = await client.request(method, path, json=body, headers=member)
        assert response.status_code == 403, (method, path)
    assert (await client.get(base(integration), headers=member)).json()["name"] == "Memo Server"


async def test_agents_link_integrations_of_their_organization(
    client: httpx.AsyncClient, make_tenant: MakeTenant, mcp_server: FakeMcpServer
) -> None:
    mine, theirs = await make_tenant(), await make_tenant()
    own = await create_integration(client, mine, mcp_server.url)
    foreign = await create_integration(client, theirs, mcp_server.url)
    agent = await client.post("/v1/agents", json={"name": "A", "mcp_integration_ids": [own["id"]]}, headers=mine.admin)
    assert agent.status_code == 201
    refused = await client.post(
        "/v1/agents", json={"name": "B", "mcp_integration_ids": [foreign["id"]]}, headers=mine.admin
    )
    assert refused.status_code == 422 and refused.json()["error"] == "InvalidReference"

    assert (await client.delete(base(own), headers=mine.admin)).status_code == 204
    after = (await client.get(f"/v1/agents/{agent.json()['id']}", headers=mine.admin)).json()
    assert after["mcp_integration_ids"] == []
    assert (await client.get(base(own), headers=mine.admin)).status_code == 404
