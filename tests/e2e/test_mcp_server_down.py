"""An integration whose MCP server died after its catalog was cached: after the first failed call its tools
are no longer offered (the run says why) until the server is back."""

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.conftest import Tenant
from tests.e2e.runs import agent_and_thread, messages, settle, start
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall
from tests.fakes.relay import Relay


@pytest.fixture
async def relay() -> AsyncIterator[Relay]:
    """A server that announces no changes and lets its tools be cached for ten minutes, behind a relay the
    test stops (the server dies) and starts again (it is back)."""
    async with (
        FakeMcpServer(announces_changes=False, list_ttl_ms=600_000) as server,
        Relay(server.port) as relay,
    ):
        yield relay


async def offered_after(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, thread: dict[str, Any], *calls: FakeToolCall
) -> tuple[dict[str, Any], set[str]]:
    """A run that makes `calls` (if any) and then answers; the run, and the tools its first request offered."""
    openai.reset()
    if calls:
        openai.reply_tool_calls(*calls)
    openai.reply_text("done")
    done = await settle(client, tenant, (await start(client, tenant, thread, input="go"))["id"])
    assert done["status"] == "completed", done
    return done, {t["function"]["name"] for t in openai.requests[0].get("tools", [])}


async def test_a_dead_servers_tools_are_skipped_with_a_warning_until_it_is_back(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, relay: Relay
) -> None:
    body = {"name": "Flaky", "url": f"{relay.base_url}/mcp", "timeout_seconds": 5}
    created = await client.post("/v1/mcp-integrations", json=body, headers=tenant.admin)
    assert created.status_code == 201, created.text
    _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[created.json()["id"]])
    echo = FakeToolCall("flaky__echo", {"message": "hi"})

    alive, offered = await offered_after(client, tenant, openai, thread, echo)
    assert "flaky__echo" in offered and alive["warnings"] == []

    await relay.stop()
    _, offered = await offered_after(client, tenant, openai, thread, echo)
    assert "flaky__echo" in offered  # the catalog was cached: nothing had failed yet
    assert "lost" in (await messages(client, tenant, thread))[-2]["content"][0]["result"]

    skipped, offered = await offered_after(client, tenant, openai, thread)
    assert not any(name.startswith("flaky__") for name in offered)
    assert any("'flaky' was skipped" in w for w in skipped["warnings"]), skipped["warnings"]

    await relay.start()
    back, offered = await offered_after(client, tenant, openai, thread, echo)
    assert "flaky__echo" in offered and back["warnings"] == []
    assert "Echo: hi" in (await messages(client, tenant, thread))[-2]["content"][0]["result"]
