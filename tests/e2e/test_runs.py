"""Runs over HTTP: a real database, the real OpenAI SDK against a fake OpenAI server on loopback,
and real MCP servers."""

import asyncio

import httpx

from tests.conftest import Tenant
from tests.e2e.runs import agent_and_thread, messages, settle, sse_events, start
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.openai_server import ErrorReply, FakeOpenAI, FakeToolCall, ToolCallsReply


async def test_the_offline_model_answers_without_any_provider(client: httpx.AsyncClient, tenant: Tenant) -> None:
    _, thread = await agent_and_thread(client, tenant, model="threadline-offline", instructions="Be brief.")
    run = await start(client, tenant, thread, input="Hello there")
    assert run["status"] == "queued"
    done = await settle(client, tenant, run["id"])
    assert done["status"] == "completed" and len(done["steps"]) == 1
    assert done["usage"]["total_tokens"] > 0
    history = await messages(client, tenant, thread)
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert "Hello there" in history[1]["content"][0]["text"]


async def test_a_run_uses_an_mcp_tool_a_resource_and_a_prompt_then_answers(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, mcp_server: FakeMcpServer
) -> None:
    integration = (
        await client.post("/v1/mcp-integrations", json={"name": "Memo", "url": mcp_server.url}, headers=tenant.admin)
    ).json()
    _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[integration["id"]])
    openai.reply_tool_calls(
        FakeToolCall("memo__echo", {"message": "hi"}),
        FakeToolCall("retrieve_mcp_resource", {"integrationId": integration["id"], "uri": "memo://notes"}),
        FakeToolCall(
            "retrieve_mcp_prompt",
            {"integrationId": integration["id"], "promptName": "greet", "arguments": {"name": "Ada"}},
        ),
    )
    openai.reply_text("All three done.")
    run = await start(client, tenant, thread, input="Use your tools")
    done = await settle(client, tenant, run["id"])
    assert done["status"] == "completed", done
    assert [len(s["tool_calls"]) for s in done["steps"]] == [3, 0]

    offered = {t["function"]["name"] for t in openai.requests[0]["tools"]}
    assert {"memo__echo", "memo__add", "retrieve_mcp_prompt", "retrieve_mcp_resource"} <= offered
    prompt_tool = next(t for t in openai.requests[0]["tools"] if t["function"]["name"] == "retrieve_mcp_prompt")
    assert integration["id"] in prompt_tool["function"]["description"]
    assert "greet(name)" in prompt_tool["function"]["description"]

    history = await messages(client, tenant, thread)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    results = history[2]["content"]
    assert [r["tool_name"] for r in results] == ["memo__echo", "retrieve_mcp_resource", "retrieve_mcp_prompt"]
    assert results[0]["result"] == "Echo: hi"
    assert results[1]["result"].startswith("Imported resource memo://notes")
    assert "Remember the milk." in results[1]["result"]
    assert (
        results[2]["result"] == "Prompt: greet\nDescription: Greets someone\n\nMessages:\n1. User: Say hello to Ada.\n"
    )
    assert history[3]["content"][0]["text"] == "All three done."
    sources = (await client.get(f"/v1/threads/{thread['id']}/sources", headers=tenant.admin)).json()["data"]
    assert [(s["name"], s["created_by"]) for s in sources] == [("Notes", "llm")]
    tool_messages = [m for m in openai.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages][:2] == ["Echo: hi", results[1]["result"]]


async def test_tool_failures_are_told_to_the_model(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, mcp_server: FakeMcpServer
) -> None:
    integration = (
        await client.post("/v1/mcp-integrations", json={"name": "Memo", "url": mcp_server.url}, headers=tenant.admin)
    ).json()
    _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[integration["id"]])
    openai.reply_tool_calls(
        FakeToolCall("retrieve_mcp_prompt", {"promptName": "greet"}),
        FakeToolCall("retrieve_mcp_prompt", {"integrationId": integration["id"], "promptName": "nope"}),
        FakeToolCall("retrieve_mcp_resource", {"integrationId": integration["id"], "uri": "memo://missing"}),
        FakeToolCall("teleport", {}),
        FakeToolCall("memo__fail", {}),
        FakeToolCall("memo__add", "{not json"),
    )
    openai.reply_text("I see.")
    done = await settle(client, tenant, (await start(client, tenant, thread, input="go"))["id"])
    assert done["status"] == "completed"
    results = [r["result"] for r in (await messages(client, tenant, thread))[2]["content"]]
    assert results[0] == "Prompt retrieval failed: integrationId parameter is required"
    assert results[1] == "Prompt retrieval failed: integration 'memo' has no prompt 'nope'"
    assert results[2].startswith("Resource retrieval failed: the MCP server has no such resource")
    assert results[3].startswith("Tool 'teleport' does not exist. Available tools: ")
    assert "memo__echo" in results[3]
    assert results[4] == "it broke"
    assert results[5].startswith("Invalid arguments for tool 'memo__add'")
    assert [c["is_error"] for c in done["steps"][0]["tool_calls"]] == [True, True, True, True, True, True]


async def test_a_client_tool_pauses_the_run_until_the_client_answers(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    _, thread = await agent_and_thread(client, tenant)
    openai.reply_tool_calls(FakeToolCall("get_location", {"precise": True}, id="call_loc"))
    openai.reply_text("You are in Lisbon.")
    tool = {"name": "get_location", "description": "Where the user is", "parameters": {"type": "object"}}
    run = await start(client, tenant, thread, input="Where am I?", tools=[tool])
    waiting = await settle(client, tenant, run["id"])
    assert waiting["status"] == "requires_action"
    assert waiting["required_action"] == {
        "type": "submit_tool_results",
        "tool_calls": [
            {"tool_call_id": "call_loc", "name": "get_location", "type": "client", "arguments": {"precise": True}}
        ],
    }
    url = f"/v1/runs/{run['id']}/tool-results"
    wrong = await client.post(
        url, json={"tool_results": [{"tool_use_id": "nope", "result": "x"}]}, headers=tenant.admin
    )
    assert wrong.status_code == 409 and wrong.json()["error"] == "RunNotWaiting"

    resumed = await client.post(
        url, json={"tool_results": [{"tool_use_id": "call_loc", "result": "Lisbon, Portugal"}]}, headers=tenant.admin
    )
    assert resumed.status_code == 200 and resumed.json()["status"] == "in_progress"
    done = await settle(client, tenant, run["id"])
    assert done["status"] == "completed"
    assert openai.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_loc",
        "content": "Lisbon, Portugal",
    }
    again = await client.post(
        url, json={"tool_results": [{"tool_use_id": "call_loc", "result": "x"}]}, headers=tenant.admin
    )
    assert again.status_code == 409


async def test_a_cancelled_run_stops_its_model_call(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    _, thread = await agent_and_thread(client, tenant)
    held = openai.hold()
    run = await start(client, tenant, thread, input="Think hard")
    await asyncio.wait_for(held.received.wait(), 10)
    cancelled = await client.post(f"/v1/runs/{run['id']}/cancel", headers=tenant.admin)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    await asyncio.wait_for(held.abandoned.wait(), 10)  # the provider saw the request go away
    again = await client.post(f"/v1/runs/{run['id']}/cancel", headers=tenant.admin)
    assert again.status_code == 409
    events = sse_events((await client.get(f"/v1/runs/{run['id']}/events", headers=tenant.admin)).text)
    assert events[-1]["type"] == "run.cancelled"


async def test_a_provider_that_keeps_failing_fails_the_run(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    _, thread = await agent_and_thread(client, tenant)
    openai.script(
        ErrorReply(500, "upstream exploded"), ErrorReply(500, "upstream exploded"), ErrorReply(500, "upstream exploded")
    )
    done = await settle(client, tenant, (await start(client, tenant, thread, input="hi"))["id"])
    assert done["status"] == "failed"
    assert done["error"]["code"] == "model_unavailable"
    assert "500" in done["error"]["message"] and "sk-test" not in done["error"]["message"]
    assert len(openai.requests) == 3


async def test_a_run_that_never_stops_calling_tools_hits_max_steps(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    _, thread = await agent_and_thread(client, tenant, max_steps=3, tools=[{"type": "source_query"}])
    openai.responder = lambda body: ToolCallsReply([FakeToolCall("source_query", {"query": "anything"})])
    done = await settle(client, tenant, (await start(client, tenant, thread, input="loop"))["id"])
    assert done["status"] == "failed" and done["error"]["code"] == "max_steps_exceeded"
    assert len(done["steps"]) == 3 and len(openai.requests) == 3


async def test_one_mcp_server_down_does_not_stop_the_run(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, mcp_server: FakeMcpServer
) -> None:
    up = (
        await client.post("/v1/mcp-integrations", json={"name": "Up", "url": mcp_server.url}, headers=tenant.admin)
    ).json()
    down = (
        await client.post(
            "/v1/mcp-integrations",
            json={"name": "Down", "url": "http://127.0.0.1:9/mcp", "timeout_seconds": 2},
            headers=tenant.admin,
        )
    ).json()
    _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[up["id"], down["id"]])
    openai.reply_tool_calls(FakeToolCall("up__add", {"a": 1, "b": 2}))
    openai.reply_text("3")
    done = await settle(client, tenant, (await start(client, tenant, thread, input="add"))["id"])
    assert done["status"] == "completed"
    assert any("'down' was skipped" in w for w in done["warnings"])
    offered = {t["function"]["name"] for t in openai.requests[0]["tools"]}
    assert "up__add" in offered and not any(name.startswith("down__") for name in offered)


async def test_streaming_delivers_text_deltas_and_the_final_event(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    _, thread = await agent_and_thread(client, tenant)
    openai.reply_text("Streaming works one word at a time.")
    response = await client.post(
        f"/v1/threads/{thread['id']}/runs", json={"input": "stream please", "stream": True}, headers=tenant.admin
    )
    assert response.status_code == 201 and response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    types = [e["type"] for e in events]
    assert types[0] == "run.created" and types[1] == "run.in_progress" and types[-1] == "run.completed"
    deltas = [e["data"]["text"] for e in events if e["type"] == "message.delta"]
    assert len(deltas) > 1 and "".join(deltas) == "Streaming works one word at a time."
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert all(e["run_id"] == events[0]["run_id"] for e in events)

    replay = sse_events((await client.get(f"/v1/runs/{events[0]['run_id']}/events", headers=tenant.admin)).text)
    assert [e["type"] for e in replay] == types
    later = sse_events(
        (await client.get(f"/v1/runs/{events[0]['run_id']}/events", headers=tenant.admin | {"Last-Event-ID": "2"})).text
    )
    assert later[0]["seq"] == 3


async def test_the_same_idempotency_key_gives_the_same_run(client: httpx.AsyncClient, tenant: Tenant) -> None:
    _, thread = await agent_and_thread(client, tenant, model="threadline-offline")
    body = {"input": "once", "idempotency_key": "req-42"}
    first = await client.post(f"/v1/threads/{thread['id']}/runs", json=body, headers=tenant.admin)
    await settle(client, tenant, first.json()["id"])
    second = await client.post(f"/v1/threads/{thread['id']}/runs", json=body, headers=tenant.admin)
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["id"] == second.json()["id"]
    assert [m["role"] for m in await messages(client, tenant, thread)] == ["user", "assistant"]


async def test_runs_are_listed_and_filtered(client: httpx.AsyncClient, tenant: Tenant) -> None:
    agent, thread = await agent_and_thread(client, tenant, model="threadline-offline")
    first = await start(client, tenant, thread, input="one")
    await settle(client, tenant, first["id"])
    busy_check = await start(client, tenant, thread, input="two")
    await settle(client, tenant, busy_check["id"])
    by_thread = (await client.get(f"/v1/threads/{thread['id']}/runs", headers=tenant.admin)).json()["data"]
    assert [r["id"] for r in by_thread] == [first["id"], busy_check["id"]]
    by_agent = (
        await client.get("/v1/runs", params={"agent_id": agent["id"], "status": "completed"}, headers=tenant.admin)
    ).json()
    assert len(by_agent["data"]) == 2
    none = (
        await client.get("/v1/runs", params={"status": "failed", "agent_id": agent["id"]}, headers=tenant.admin)
    ).json()
    assert none["data"] == []
    assert (await client.get("/v1/runs", params={"status": "sleeping"}, headers=tenant.admin)).status_code == 422


async def test_run_input_is_checked(client: httpx.AsyncClient, tenant: Tenant) -> None:
    thread = (await client.post("/v1/threads", json={}, headers=tenant.admin)).json()
    no_agent = await client.post(f"/v1/threads/{thread['id']}/runs", json={"input": "x"}, headers=tenant.admin)
    assert no_agent.status_code == 422 and "agent" in no_agent.json()["detail"]
    for body in (
        {"input": ""},
        {"input": 5},
        {"tools": [{"name": "has spaces"}]},
        {"tools": [{"name": "a"}, {"name": "a"}]},
        {"stream": "yes"},
        {"surprise": 1},
    ):
        response = await client.post(f"/v1/threads/{thread['id']}/runs", json=body, headers=tenant.admin)
        assert response.status_code == 422, body
