"""Both protocol generations of MCP clients are told when an agent is published and unpublished (template
files: see test_prompt_files.py)."""

from typing import Any

import httpx

from tests.conftest import Tenant
from tests.e2e.mcp_changes import both_generations, next_change
from tests.e2e.test_mcp_server import publish_agent


async def test_publishing_and_unpublishing_an_agent_tells_both_generations(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant
) -> None:
    async with both_generations(live_url, tenant) as (legacy, changes):
        agent = await publish_agent(client, tenant)
        await legacy.wait_for("notifications/tools/list_changed", 1)
        await legacy.wait_for("notifications/prompts/list_changed", 1)
        await next_change(changes)

        response = await client.patch(f"/v1/agents/{agent['id']}", json={"publish_as_mcp": False}, headers=tenant.admin)
        assert response.status_code == 200, response.text
        await legacy.wait_for("notifications/tools/list_changed", 2)
        await legacy.wait_for("notifications/prompts/list_changed", 2)
        await next_change(changes)


async def test_another_organizations_changes_are_not_told(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant, make_tenant: Any
) -> None:
    other: Tenant = await make_tenant()
    async with both_generations(live_url, tenant) as (legacy, _changes):
        await publish_agent(client, other)
        mine = await publish_agent(client, tenant, name="Mine", slug="mine")
        await legacy.wait_for("notifications/tools/list_changed", 1)
        assert legacy.counts["notifications/tools/list_changed"] == 1, mine
