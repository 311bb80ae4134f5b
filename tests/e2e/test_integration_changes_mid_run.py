"""A run's tool calls use the integration its tools were assembled from, yet an integration disabled or changed
while the run goes on is honoured by its next tool call."""

from typing import Any

import httpx
import pytest

from tests.conftest import Tenant
from tests.e2e.runs import agent_and_thread, messages, settle, start
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, ToolCallsReply

# One process: the change reaches the run's tool calls as the change's request is answered. Across processes
# (the queue executor) it reaches them as the catalog change notice does, a few milliseconds later.
pytestmark = pytest.mark.executors("in_process")

CHANGES: dict[str, tuple[str, str, dict[str, Any] | None, str]] = {
    "disabled": ("POST", "/disable", None, "Tool call failed: MCP integration 'memo' is disabled"),
    "tool filtered out": (
        "PATCH",
        "",
        {"tool_filter": {"mode": "exclude", "names": ["echo"]}},
        "Tool call failed: integration 'memo' has no tool 'echo'",
    ),
}


@pytest.mark.parametrize("change", list(CHANGES))
async def test_an_integration_changed_mid_run_is_honoured_by_the_next_tool_call(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, mcp_server: FakeMcpServer, change: str
) -> None:
    integration = (
        await client.post("/v1/mcp-integrations", json={"name": "Memo", "url": mcp_server.url}, headers=tenant.admin)
    ).json()
    _, thread = await agent_and_thread(client, tenant, model="gpt-test", mcp_integration_ids=[integration["id"]])
    openai.reply_tool_calls(FakeToolCall("memo__echo", {"message": "before"}))
    held = openai.hold()  # the model's second call, after the first tool call
    openai.reply_text("Done.")
    run = await start(client, tenant, thread, input="Echo twice")
    await held.received.wait()

    method, path, body, refusal = CHANGES[change]
    changed = await client.request(
        method, f"/v1/mcp-integrations/{integration['id']}{path}", json=body, headers=tenant.admin
    )
    assert changed.status_code == 200, changed.text
    held.release(ToolCallsReply([FakeToolCall("memo__echo", {"message": "after"})]))

    assert (await settle(client, tenant, run["id"]))["status"] == "completed"
    history = await messages(client, tenant, thread)
    assert history[2]["content"][0]["result"] == "Echo: before"
    assert history[4]["content"][0]["result"] == refusal
    assert history[4]["content"][0]["is_error"] is True
