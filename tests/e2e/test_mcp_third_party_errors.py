"""What a third-party MCP server refuses reaches the caller as a typed 4xx error, and the model in a run is
told the same words: server-everything (over stdio) for a missing prompt argument and an unknown resource,
server-filesystem (over stdio; tools only) for reading a resource."""

from typing import Any

import httpx
import pytest

from tests.conftest import Tenant
from tests.e2e.runs import agent_and_thread, messages, settle, start
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall
from tests.mcp_servers import everything, filesystem


@pytest.fixture
async def everything_integration(client: httpx.AsyncClient, tenant: Tenant) -> dict[str, Any]:
    everything.require_everything()
    created = await client.post(
        "/v1/mcp-integrations",
        json={"name": "Everything", "transport": "stdio", "server": "everything"},
        headers=tenant.admin,
    )
    assert created.status_code == 201, created.text
    integration: dict[str, Any] = created.json()
    return integration


async def test_a_missing_prompt_argument_is_the_callers_mistake(
    client: httpx.AsyncClient, tenant: Tenant, everything_integration: dict[str, Any], openai: FakeOpenAI
) -> None:
    url = f"/v1/mcp-integrations/{everything_integration['id']}/prompts/args-prompt/get"
    refused = await client.post(url, json={"arguments": {}}, headers=tenant.admin)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == "McpInvalidArguments"
    detail = refused.json()["detail"]
    assert "args-prompt" in detail

    _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[everything_integration["id"]])
    openai.reply_tool_calls(
        FakeToolCall(
            "retrieve_mcp_prompt",
            {"integrationId": everything_integration["id"], "promptName": "args-prompt", "arguments": {}},
        )
    )
    openai.reply_text("It needs a city.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="go"))["id"])
    assert run["status"] == "completed", run
    told = (await messages(client, tenant, thread))[2]["content"][0]
    assert told["is_error"] is True
    assert told["result"] == f"Prompt retrieval failed: {detail}"


async def test_an_unknown_resource_is_not_found(
    client: httpx.AsyncClient, tenant: Tenant, everything_integration: dict[str, Any]
) -> None:
    url = f"/v1/mcp-integrations/{everything_integration['id']}/resources/read"
    missing = await client.post(url, json={"uri": "demo://resource/static/document/nothing.md"}, headers=tenant.admin)
    assert missing.status_code == 404, missing.text
    assert missing.json()["error"] == "McpResourceNotFound"


async def test_reading_resources_of_a_server_without_resources_is_a_missing_capability(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    filesystem.require_filesystem()
    created = await client.post(
        "/v1/mcp-integrations",
        json={"name": "Files", "transport": "stdio", "server": "filesystem"},
        headers=tenant.admin,
    )
    assert created.status_code == 201, created.text
    integration = created.json()
    url = f"/v1/mcp-integrations/{integration['id']}/resources/read"
    refused = await client.post(url, json={"uri": "file:///hello.txt"}, headers=tenant.admin)
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"] == "McpCapabilityMissing"
    detail = refused.json()["detail"]

    _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[integration["id"]])
    openai.reply_tool_calls(
        FakeToolCall("retrieve_mcp_resource", {"integrationId": integration["id"], "uri": "file:///hello.txt"})
    )
    openai.reply_text("That server has no resources.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="go"))["id"])
    assert run["status"] == "completed", run
    told = (await messages(client, tenant, thread))[2]["content"][0]
    assert told["is_error"] is True
    assert told["result"] == f"Resource retrieval failed: {detail}"


async def test_sampling_is_not_offered_to_integrated_servers(
    client: httpx.AsyncClient, tenant: Tenant, everything_integration: dict[str, Any]
) -> None:
    """server-everything offers its sampling tool only to clients that declare sampling: Threadline does not
    (sampling is deprecated in 2026-07-28, SEP-2577), so the tool is not there to call."""
    tools = await client.get(f"/v1/mcp-integrations/{everything_integration['id']}/tools", headers=tenant.admin)
    assert tools.status_code == 200, tools.text
    names = {t["name"] for t in tools.json()["data"]}
    assert "echo" in names and "trigger-sampling-request" not in names
