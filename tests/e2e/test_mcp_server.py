"""Threadline's /mcp endpoint, used by the `mcp` SDK's client over Streamable HTTP on loopback."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from infrastructure.tracing import LangfuseTracer
from tests.conftest import MakeTenant, Tenant
from tests.e2e.runs import settle
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.otlp_receiver import OtlpReceiver


def text_of(content: types.ContentBlock) -> str:
    """The text of a content block the test expects to be text."""
    assert isinstance(content, types.TextContent), content
    return content.text


@asynccontextmanager
async def mcp_client(live_url: str, tenant: Tenant, **options: Any) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers=tenant.admin, timeout=httpx2.Timeout(30, read=300))
    transport = streamable_http_client(f"{live_url}/mcp", http_client=http)
    async with http, Client(transport, cache=None, **options) as client:
        yield client


async def publish_agent(client: httpx.AsyncClient, tenant: Tenant, **fields: Any) -> dict[str, Any]:
    body = {
        "name": "Echo Bot",
        "slug": "echo-bot",
        "model": "threadline-offline",
        "publish_as_mcp": True,
        "description": "Answers anything",
        "instructions": "You echo. Keep it short.",
    } | fields
    response = await client.post("/v1/agents", json=body, headers=tenant.admin)
    assert response.status_code == 201, response.text
    agent: dict[str, Any] = response.json()
    return agent


async def create_template(client: httpx.AsyncClient, tenant: Tenant, agent: dict[str, Any]) -> dict[str, Any]:
    body = {
        "name": "brief-me",
        "description": "Brief me on a topic for an audience",
        "agent_id": agent["id"],
        "arguments": [
            {"name": "topic", "required": True, "autocomplete": True},
            {
                "name": "audiences",
                "type": "array",
                "default": ["engineers"],
                "autocomplete": ["executives", "engineers"],
            },
            {"name": "tone", "autocomplete": ["formal", "friendly"]},
        ],
        "messages": [
            {
                "role": "user",
                "content": "Brief {audiences} on {topic} in a {tone|default:neutral} tone. See https://x.example/{id}.",
            }
        ],
    }
    response = await client.post("/v1/prompt-templates", json=body, headers=tenant.admin)
    assert response.status_code == 201, response.text
    template: dict[str, Any] = response.json()
    return template


async def test_no_key_gets_a_401_with_a_bearer_challenge(live_url: str) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{live_url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        wrong = await http.post(f"{live_url}/mcp", json={}, headers={"Authorization": "Bearer tl_nope"})
    assert response.status_code == 401 and wrong.status_code == 401
    assert response.headers["www-authenticate"].startswith('Bearer realm="threadline"')
    assert response.json()["error"] == "NotAuthenticated"


async def test_a_foreign_host_header_is_refused(live_url: str, tenant: Tenant) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{live_url}/mcp", json={}, headers=tenant.admin | {"Host": "evil.example"})
    assert response.status_code == 421


async def test_tools_and_prompts_are_the_organizations_own(
    client: httpx.AsyncClient,
    live_url: str,
    make_tenant: MakeTenant,
) -> None:
    mine, theirs = await make_tenant(), await make_tenant()
    agent = await publish_agent(client, mine)
    await client.post("/v1/agents", json={"name": "Hidden", "model": "threadline-offline"}, headers=mine.admin)
    await create_template(client, mine, agent)
    async with mcp_client(live_url, mine) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        prompts = {p.name: p for p in (await session.list_prompts()).prompts}
    assert set(tools) == {"echo-bot", "brief_me"}
    assert tools["echo-bot"].description == "Answers anything"
    assert tools["echo-bot"].input_schema == {
        "type": "object",
        "properties": {"input": {"type": "string"}},
        "required": ["input"],
    }
    assert tools["brief_me"].input_schema["required"] == ["topic"]
    assert tools["brief_me"].input_schema["properties"]["audiences"] == {"type": "array", "items": {"type": "string"}}
    assert set(prompts) == {"echo-bot", "brief-me"}
    assert [a.name for a in prompts["brief-me"].arguments or []] == ["topic", "audiences", "tone"]

    async with mcp_client(live_url, theirs) as session:
        assert (await session.list_tools()).tools == []
        assert (await session.list_prompts()).prompts == []
        with pytest.raises(MCPError):
            await session.get_prompt("brief-me", {})


@pytest.mark.executors  # the run executes in the API process, its events on the executor's bus
async def test_calling_an_agent_tool_runs_it_with_progress(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant
) -> None:
    await publish_agent(client, tenant)
    reported: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append((progress, message))

    async with mcp_client(live_url, tenant) as session:
        result = await session.call_tool("echo-bot", {"input": "Say hi to Ada"}, progress_callback=on_progress)
    assert result.is_error is False
    assert "Say hi to Ada" in text_of(result.content[0])
    assert reported == [(0.0, "Starting agent"), (1.0, "Completed")]
    assert result.meta is not None
    run_id = result.meta["threadline/run_id"]
    run = (await client.get(f"/v1/runs/{run_id}", headers=tenant.admin)).json()
    assert run["status"] == "completed"
    messages = (await client.get(f"/v1/threads/{run['thread_id']}/messages", headers=tenant.admin)).json()["data"]
    assert messages[0]["content"][0]["text"] == "Say hi to Ada"


@pytest.mark.executors  # the run executes in the API process, its events on the executor's bus
async def test_a_failed_run_is_an_error_result(client: httpx.AsyncClient, live_url: str, tenant: Tenant) -> None:
    await publish_agent(client, tenant, slug="no-model", model="gpt-unconfigured")
    async with mcp_client(live_url, tenant) as session:
        result = await session.call_tool("no-model", {"input": "hello"})
        missing = await session.call_tool("no-model", {})
    assert result.is_error is True
    assert "THREADLINE_OPENAI_API_KEY" in text_of(result.content[0])
    assert missing.is_error is True


async def test_templates_render_with_strings_arrays_and_defaults(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant
) -> None:
    agent = await publish_agent(client, tenant)
    await create_template(client, tenant, agent)
    async with mcp_client(live_url, tenant) as session:
        answer = await session.call_tool("brief_me", {"topic": "MCP", "audiences": ["executives", "sales"]})
        defaults = await session.call_tool("brief_me", {"topic": "{tone} injection"})
        missing = await session.call_tool("brief_me", {"audiences": ["x"]})
    assert answer.is_error is False
    text = text_of(answer.content[0])
    assert "Brief executives, sales on MCP in a neutral tone. See https://x.example/{id}." in text
    assert "Brief engineers on {tone} injection in a neutral tone." in text_of(defaults.content[0])
    assert missing.is_error is True and "topic" in text_of(missing.content[0])


async def test_template_prompts_tell_a_model_which_tool_to_call(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant
) -> None:
    agent = await publish_agent(client, tenant)
    await create_template(client, tenant, agent)
    async with mcp_client(live_url, tenant) as session:
        without = await session.get_prompt("brief-me", {})
        given = await session.get_prompt("brief-me", {"topic": "MCP", "tone": "formal"})
        agent_prompt = await session.get_prompt("echo-bot", {})
    assert text_of(without.messages[0].content) == (
        "Use the brief_me tool to brief me on a topic for an audience\n\n"
        "Call it with the following arguments:\n"
        "  - topic: <required, not provided>\n"
        "  - audiences: <optional, not provided>\n"
        "  - tone: <optional, not provided>"
    )
    assert "  - topic: MCP\n" in text_of(given.messages[0].content)
    assert "  - tone: formal" in text_of(given.messages[0].content)
    assert agent_prompt.description == "Answers anything"
    assert text_of(agent_prompt.messages[0].content) == "You echo. Keep it short."


async def test_arguments_complete_from_the_template_and_from_earlier_use(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant
) -> None:
    agent = await publish_agent(client, tenant)
    await create_template(client, tenant, agent)
    reference = types.PromptReference(type="ref/prompt", name="brief-me")
    async with mcp_client(live_url, tenant) as session:
        listed = await session.complete(reference, {"name": "audiences", "value": "ex"})
        assert listed.completion.values == ["executives"]
        assert (await session.complete(reference, {"name": "topic", "value": "Qu"})).completion.values == []
        await session.call_tool("brief_me", {"topic": "Quantum computing"})
        await session.call_tool("brief_me", {"topic": "Quarterly results"})
        remembered = await session.complete(reference, {"name": "topic", "value": "qu"})
    assert remembered.completion.values == ["Quarterly results", "Quantum computing"]


@pytest.mark.executors  # the run executes in the API process, its events on the executor's bus
async def test_a_client_that_cancels_cancels_the_run(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant, openai: FakeOpenAI
) -> None:
    agent = await publish_agent(client, tenant, slug="slow-bot", model="gpt-test")
    held = openai.hold()
    async with mcp_client(live_url, tenant) as session:
        call = asyncio.create_task(session.call_tool("slow-bot", {"input": "take your time"}))
        await asyncio.wait_for(held.received.wait(), 10)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.wait_for(held.abandoned.wait(), 10)
    [run] = (await client.get("/v1/runs", params={"agent_id": agent["id"]}, headers=tenant.admin)).json()["data"]
    assert (await settle(client, tenant, run["id"]))["status"] == "cancelled"


@pytest.mark.executors  # the run executes in the API process, its events on the executor's bus
async def test_a_published_agents_run_is_traced(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant, traced: tuple[LangfuseTracer, OtlpReceiver]
) -> None:
    tracer, receiver = traced
    await publish_agent(client, tenant)
    async with mcp_client(live_url, tenant) as session:
        result = await session.call_tool("echo-bot", {"input": "trace me"})
    assert result.meta is not None
    run = (await client.get(f"/v1/runs/{result.meta['threadline/run_id']}", headers=tenant.admin)).json()
    await tracer.flush()
    root = await receiver.wait_for_span("run")
    assert run["trace_id"] == root.trace_id
    assert root.json_attribute("langfuse.trace.metadata.run_id") == run["id"]


async def test_a_handshake_era_client_is_told_the_lists_it_will_hear_changes_of(live_url: str, tenant: Tenant) -> None:
    async with mcp_client(live_url, tenant, mode="legacy") as legacy:
        capabilities = legacy.server_capabilities
    assert capabilities.tools is not None and capabilities.tools.list_changed is True
    assert capabilities.prompts is not None and capabilities.prompts.list_changed is True
    assert capabilities.resources is not None and capabilities.resources.list_changed is True
    assert capabilities.resources.subscribe is True
