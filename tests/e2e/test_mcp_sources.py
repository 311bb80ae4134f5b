"""The organization's sources as MCP resources on /mcp: listed (every thread's and agent's), read with their
mime type, found by a template, another tenant's never seen; clients of both protocol generations are told
when sources come and go, and those subscribed to one when it is deleted."""

import json

import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

from tests.conftest import MakeTenant, Tenant
from tests.e2e.mcp_changes import Notifications, next_change
from tests.e2e.test_mcp_server import mcp_client
from tests.e2e.test_sources import MARKDOWN, new_thread, upload

MODERN = "2026-07-28"
CSV = b"city,rain\nOslo,763\nBergen,2250\n"


async def uploaded(client: httpx.AsyncClient, tenant: Tenant, path: str, name: str, content: bytes) -> str:
    response = await upload(client, tenant, path, name, content)
    assert response.status_code == 201, response.text
    return f"threadline://sources/{response.json()['source']['id']}"


async def agent_id(client: httpx.AsyncClient, tenant: Tenant) -> str:
    made = await client.post("/v1/agents", json={"name": "Librarian"}, headers=tenant.admin)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_sources_are_listed_and_read_with_their_mime_type(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant, mode: str
) -> None:
    thread = await new_thread(client, tenant)
    garden = await uploaded(client, tenant, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)
    agent = await agent_id(client, tenant)
    rain = await uploaded(client, tenant, f"/v1/agents/{agent}/sources", "rain.csv", CSV)

    async with mcp_client(live_url, tenant, mode=mode) as session:
        listed = await session.list_resources()
        templates = (await session.list_resource_templates()).resource_templates
        text = (await session.read_resource(garden)).contents
        table = (await session.read_resource(rain)).contents
        [of_thread] = (await session.read_resource(f"threadline://threads/{thread}/sources")).contents
        [of_agent] = (await session.read_resource(f"threadline://agents/{agent}/sources")).contents

    by_uri = {str(r.uri): r for r in listed.resources}
    assert set(by_uri) == {garden, rain}
    assert (by_uri[garden].name, by_uri[garden].mime_type, by_uri[garden].size) == (
        "garden.md",
        "text/markdown",
        len(MARKDOWN),
    )
    assert f"thread {thread}" in (by_uri[garden].description or "")
    assert (by_uri[rain].name, by_uri[rain].mime_type) == ("rain.csv", "text/csv")
    assert [t.uri_template for t in templates] == [
        "threadline://sources/{source_id}",
        "threadline://threads/{thread_id}/sources",
        "threadline://agents/{agent_id}/sources",
    ]
    assert isinstance(of_thread, types.TextResourceContents) and of_thread.mime_type == "application/json"
    assert json.loads(of_thread.text) == {
        "sources": [
            {"uri": garden, "name": "garden.md", "mimeType": "text/markdown", "size": len(MARKDOWN), "kind": "text"}
        ],
        "truncated": False,
    }
    assert isinstance(of_agent, types.TextResourceContents)
    assert [s["uri"] for s in json.loads(of_agent.text)["sources"]] == [rain]
    [garden_text] = text
    assert isinstance(garden_text, types.TextResourceContents) and garden_text.mime_type == "text/markdown"
    assert garden_text.text == MARKDOWN.decode()
    [rain_table] = table
    assert isinstance(rain_table, types.TextResourceContents) and rain_table.mime_type == "text/csv"
    assert rain_table.text.splitlines() == ["city,rain", "Oslo,763", "Bergen,2250"]


async def test_another_organizations_sources_are_neither_listed_nor_read(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant, make_tenant: MakeTenant
) -> None:
    other = await make_tenant("Other")
    theirs = await uploaded(client, other, f"/v1/threads/{await new_thread(client, other)}/sources", "x.md", MARKDOWN)
    async with mcp_client(live_url, tenant, mode=MODERN) as session:
        assert theirs not in {str(r.uri) for r in (await session.list_resources()).resources}
        their_thread = f"threadline://threads/{await new_thread(client, other)}/sources"
        for uri in (theirs, their_thread, "threadline://sources/not-an-id", "threadline://elsewhere/1"):
            with pytest.raises(MCPError) as refused:
                await session.read_resource(uri)
            assert (refused.value.code, refused.value.error.data) == (-32602, {"uri": uri})


async def test_a_handshake_era_client_is_told_of_new_and_deleted_sources(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant
) -> None:
    thread = await new_thread(client, tenant)
    garden = await uploaded(client, tenant, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)
    told = Notifications()
    async with mcp_client(live_url, tenant, mode="legacy", message_handler=told) as session:
        await session.subscribe_resource(garden)
        await uploaded(client, tenant, f"/v1/threads/{thread}/sources", "rain.csv", CSV)
        await told.wait_for("notifications/resources/list_changed", 1)
        assert told.counts.get("notifications/resources/updated", 0) == 0  # not the source subscribed to

        deleted = await client.delete(f"/v1/sources/{garden.rsplit('/', 1)[1]}", headers=tenant.admin)
        assert deleted.status_code == 204
        await told.wait_for("notifications/resources/updated", 1)
        await told.wait_for("notifications/resources/list_changed", 2)


async def test_a_listening_client_is_told_when_its_source_is_deleted(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant
) -> None:
    thread = await new_thread(client, tenant)
    garden = await uploaded(client, tenant, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)
    async with (
        mcp_client(live_url, tenant, mode=MODERN) as session,
        session.listen(resources_list_changed=True, resource_subscriptions=[garden]) as changes,
    ):
        deleted = await client.delete(f"/v1/threads/{thread}", headers=tenant.admin)  # its sources go with it
        assert deleted.status_code == 204, deleted.text
        told = {await next_change(changes), await next_change(changes)}
    assert told == {ResourcesListChanged(), ResourceUpdated(uri=garden)}
