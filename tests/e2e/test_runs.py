"""Runs over HTTP: a real database, the real OpenAI SDK against a fake OpenAI server on loopback,
and real MCP servers."""

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest

from application.use_cases.organizations import SetOrganizationLimitsCommand
from infrastructure.container import Container
from infrastructure.settings import Executor
from tests.conftest import Tenant
from tests.e2e.runs import agent_and_thread, messages, settle, sse_events, start
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.openai_server import ErrorReply, FakeOpenAI, FakeToolCall, HeldReply, ToolCallsReply

pytestmark = pytest.mark.executors
Json = dict[str, Any]


async def add_integration(client: httpx.AsyncClient, tenant: Tenant, name: str, url: str, **fields: Any) -> Json:
    """An MCP integration of the tenant; its tools are offered to the model as `<slug>__<tool>`."""
    created = await client.post("/v1/mcp-integrations", json={"name": name, "url": url} | fields, headers=tenant.admin)
    assert created.status_code == 201, created.text
    integration: Json = created.json()
    return integration


@pytest.fixture
async def memo(client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer) -> Json:
    """The fake MCP server as the tenant's integration "Memo" (tools `memo__echo`, `memo__add`, ...)."""
    return await add_integration(client, tenant, "Memo", mcp_server.url)


# -- a run without tools -----------------------------------------------------------------------


async def test_the_offline_model_answers_without_any_provider(
    client: httpx.AsyncClient, tenant: Tenant, executor: Executor
) -> None:
    _, thread = await agent_and_thread(client, tenant, model="threadline-offline", instructions="Be brief.")
    run = await start(client, tenant, thread, input="Hello there")
    # A process that executes runs and has a slot free starts the run as it creates it; workers take it queued.
    assert run["status"] == ("queued" if executor is Executor.QUEUE else "in_progress")
    done = await settle(client, tenant, run["id"])
    assert done["status"] == "completed" and len(done["steps"]) == 1
    assert done["usage"]["total_tokens"] > 0
    history = await messages(client, tenant, thread)
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert "Hello there" in history[1]["content"][0]["text"]


# -- a run that uses an MCP tool, a resource and a prompt ----------------------------------------


@dataclass
class MemoRun:
    integration: Json
    thread: Json
    done: Json


@pytest.fixture
async def memo_run(client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, memo: Json) -> MemoRun:
    """A run whose model calls an MCP tool, retrieves a resource and a prompt in one step, then answers."""
    _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[memo["id"]])
    openai.reply_tool_calls(
        FakeToolCall("memo__echo", {"message": "hi"}),
        FakeToolCall("retrieve_mcp_resource", {"integrationId": memo["id"], "uri": "memo://notes"}),
        FakeToolCall(
            "retrieve_mcp_prompt", {"integrationId": memo["id"], "promptName": "greet", "arguments": {"name": "Ada"}}
        ),
    )
    openai.reply_text("All three done.")
    run = await start(client, tenant, thread, input="Use your tools")
    return MemoRun(memo, thread, await settle(client, tenant, run["id"]))


async def test_a_run_uses_an_mcp_tool_a_resource_and_a_prompt_then_answers(
    client: httpx.AsyncClient, tenant: Tenant, memo_run: MemoRun
) -> None:
    assert memo_run.done["status"] == "completed", memo_run.done
    assert [len(s["tool_calls"]) for s in memo_run.done["steps"]] == [3, 0]
    history = await messages(client, tenant, memo_run.thread)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[3]["content"][0]["text"] == "All three done."


async def test_the_model_is_offered_the_mcp_tools_and_the_retrieval_tools(
    openai: FakeOpenAI, memo_run: MemoRun
) -> None:
    offered = {t["function"]["name"] for t in openai.requests[0]["tools"]}
    assert {"memo__echo", "memo__add", "retrieve_mcp_prompt", "retrieve_mcp_resource"} <= offered


async def test_the_prompt_tool_describes_the_prompts_of_each_integration(openai: FakeOpenAI, memo_run: MemoRun) -> None:
    prompt_tool = next(t for t in openai.requests[0]["tools"] if t["function"]["name"] == "retrieve_mcp_prompt")
    assert memo_run.integration["id"] in prompt_tool["function"]["description"]
    assert "greet(name)" in prompt_tool["function"]["description"]


async def test_the_tool_the_resource_and_the_prompt_results_are_kept_in_the_thread(
    client: httpx.AsyncClient, tenant: Tenant, memo_run: MemoRun
) -> None:
    results = (await messages(client, tenant, memo_run.thread))[2]["content"]
    assert [r["tool_name"] for r in results] == ["memo__echo", "retrieve_mcp_resource", "retrieve_mcp_prompt"]
    assert results[0]["result"] == "Echo: hi"
    assert results[1]["result"].startswith("Imported resource memo://notes")
    assert "Remember the milk." in results[1]["result"]
    assert (
        results[2]["result"] == "Prompt: greet\nDescription: Greets someone\n\nMessages:\n1. User: Say hello to Ada.\n"
    )


async def test_a_resource_the_model_retrieved_becomes_a_source_of_the_thread(
    client: httpx.AsyncClient, tenant: Tenant, memo_run: MemoRun
) -> None:
    sources = (await client.get(f"/v1/threads/{memo_run.thread['id']}/sources", headers=tenant.admin)).json()
    assert [(s["name"], s["created_by"]) for s in sources["data"]] == [("Notes", "llm")]


async def test_the_results_are_sent_back_to_the_model(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, memo_run: MemoRun
) -> None:
    resource = (await messages(client, tenant, memo_run.thread))[2]["content"][1]["result"]
    tool_messages = [m for m in openai.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages][:2] == ["Echo: hi", resource]


async def test_tool_failures_are_told_to_the_model(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, memo: Json
) -> None:
    _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[memo["id"]])
    openai.reply_tool_calls(
        FakeToolCall("retrieve_mcp_prompt", {"promptName": "greet"}),
        FakeToolCall("retrieve_mcp_prompt", {"integrationId": memo["id"], "promptName": "nope"}),
        FakeToolCall("retrieve_mcp_resource", {"integrationId": memo["id"], "uri": "memo://missing"}),
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


async def test_one_mcp_server_down_does_not_stop_the_run(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, mcp_server: FakeMcpServer
) -> None:
    up = await add_integration(client, tenant, "Up", mcp_server.url)
    down = await add_integration(client, tenant, "Down", "http://127.0.0.1:9/mcp", timeout_seconds=2)
    _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[up["id"], down["id"]])
    openai.reply_tool_calls(FakeToolCall("up__add", {"a": 1, "b": 2}))
    openai.reply_text("3")
    done = await settle(client, tenant, (await start(client, tenant, thread, input="add"))["id"])
    assert done["status"] == "completed"
    assert any("'down' was skipped" in w for w in done["warnings"])
    offered = {t["function"]["name"] for t in openai.requests[0]["tools"]}
    assert "up__add" in offered and not any(name.startswith("down__") for name in offered)


# -- client tools --------------------------------------------------------------------------------


@pytest.fixture
async def waiting_run(client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI) -> Json:
    """A run whose model called the client's tool get_location (call_loc); it waits for the result."""
    _, thread = await agent_and_thread(client, tenant)
    openai.reply_tool_calls(FakeToolCall("get_location", {"precise": True}, id="call_loc"))
    openai.reply_text("You are in Lisbon.")
    tool = {"name": "get_location", "description": "Where the user is", "parameters": {"type": "object"}}
    run = await start(client, tenant, thread, input="Where am I?", tools=[tool])
    return await settle(client, tenant, run["id"])


async def submit(client: httpx.AsyncClient, tenant: Tenant, run: Json, call_id: str, result: str) -> httpx.Response:
    body = {"tool_results": [{"tool_use_id": call_id, "result": result}]}
    return await client.post(f"/v1/runs/{run['id']}/tool-results", json=body, headers=tenant.admin)


async def test_a_client_tool_pauses_the_run_until_the_client_answers(waiting_run: Json) -> None:
    assert waiting_run["status"] == "requires_action"
    assert waiting_run["required_action"] == {
        "type": "submit_tool_results",
        "tool_calls": [
            {"tool_call_id": "call_loc", "name": "get_location", "type": "client", "arguments": {"precise": True}}
        ],
        "elicitations": [],
    }


async def test_the_clients_result_resumes_the_run_and_reaches_the_model(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, waiting_run: Json
) -> None:
    resumed = await submit(client, tenant, waiting_run, "call_loc", "Lisbon, Portugal")
    assert resumed.status_code == 200 and resumed.json()["status"] == "in_progress"
    done = await settle(client, tenant, waiting_run["id"])
    assert done["status"] == "completed"
    assert openai.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_loc",
        "content": "Lisbon, Portugal",
    }


async def test_a_result_for_a_call_the_run_does_not_wait_for_is_refused(
    client: httpx.AsyncClient, tenant: Tenant, waiting_run: Json
) -> None:
    wrong = await submit(client, tenant, waiting_run, "nope", "x")
    assert wrong.status_code == 409 and wrong.json()["error"] == "RunNotWaiting"
    still = (await client.get(f"/v1/runs/{waiting_run['id']}", headers=tenant.admin)).json()
    assert still["status"] == "requires_action"


async def test_a_result_sent_twice_is_refused_the_second_time(
    client: httpx.AsyncClient, tenant: Tenant, waiting_run: Json
) -> None:
    assert (await submit(client, tenant, waiting_run, "call_loc", "Lisbon, Portugal")).status_code == 200
    await settle(client, tenant, waiting_run["id"])
    assert (await submit(client, tenant, waiting_run, "call_loc", "x")).status_code == 409


# -- cancelling ----------------------------------------------------------------------------------


@dataclass
class HeldRun:
    run: Json
    held: HeldReply


@pytest.fixture
async def thinking_run(client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI) -> HeldRun:
    """A run whose model call the provider holds open."""
    _, thread = await agent_and_thread(client, tenant)
    held = openai.hold()
    run = await start(client, tenant, thread, input="Think hard")
    await asyncio.wait_for(held.received.wait(), 10)
    return HeldRun(run, held)


async def test_a_cancelled_run_stops_its_model_call(
    client: httpx.AsyncClient, tenant: Tenant, thinking_run: HeldRun
) -> None:
    cancelled = await client.post(f"/v1/runs/{thinking_run.run['id']}/cancel", headers=tenant.admin)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    await asyncio.wait_for(thinking_run.held.abandoned.wait(), 10)  # the provider saw the request go away


async def test_a_run_cancelled_while_it_waits_for_its_organizations_slot_ends_cancelled_at_once(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, container: Container
) -> None:
    """A run going on after its client's tool results waits, in progress, for a free slot of its organization;
    a cancel then ends it at once, and its thread takes a new run."""
    await container.set_organization_limits().execute(
        SetOrganizationLimitsCommand(slug=tenant.slug, max_concurrent_runs=1, runs_per_minute=None)
    )
    _, thread = await agent_and_thread(client, tenant)
    openai.reply_tool_calls(FakeToolCall("get_location", {}, id="call_loc"))
    tool = {"name": "get_location", "description": "Where the user is", "parameters": {"type": "object"}}
    waiting = await settle(client, tenant, (await start(client, tenant, thread, input="Where?", tools=[tool]))["id"])
    assert waiting["status"] == "requires_action"
    _, busy_thread = await agent_and_thread(client, tenant)
    held = openai.hold()
    busy = await start(client, tenant, busy_thread, input="Think hard")  # the organization's one slot
    await asyncio.wait_for(held.received.wait(), 10)
    try:
        assert (await submit(client, tenant, waiting, "call_loc", "Lisbon")).status_code == 200  # waits for the slot
        cancelled = await asyncio.wait_for(client.post(f"/v1/runs/{waiting['id']}/cancel", headers=tenant.admin), 10)
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        assert (await client.get(f"/v1/runs/{waiting['id']}", headers=tenant.admin)).json()["status"] == "cancelled"
        again = await client.post(f"/v1/threads/{thread['id']}/runs", json={"input": "Again"}, headers=tenant.admin)
        assert again.status_code == 201, again.text  # the thread is free
        assert (await client.post(f"/v1/runs/{again.json()['id']}/cancel", headers=tenant.admin)).status_code == 200
    finally:
        await client.post(f"/v1/runs/{busy['id']}/cancel", headers=tenant.admin)
        await container.set_organization_limits().execute(
            SetOrganizationLimitsCommand(slug=tenant.slug, max_concurrent_runs=None, runs_per_minute=None)
        )


async def test_a_cancelled_run_cannot_be_cancelled_again(
    client: httpx.AsyncClient, tenant: Tenant, thinking_run: HeldRun
) -> None:
    url = f"/v1/runs/{thinking_run.run['id']}/cancel"
    assert (await client.post(url, headers=tenant.admin)).status_code == 200
    assert (await client.post(url, headers=tenant.admin)).status_code == 409


async def test_the_events_of_a_cancelled_run_end_with_run_cancelled(
    client: httpx.AsyncClient, tenant: Tenant, thinking_run: HeldRun
) -> None:
    run_id = thinking_run.run["id"]
    assert (await client.post(f"/v1/runs/{run_id}/cancel", headers=tenant.admin)).status_code == 200
    events = sse_events((await client.get(f"/v1/runs/{run_id}/events", headers=tenant.admin)).text)
    assert events[-1]["type"] == "run.cancelled"


# -- failures and limits -------------------------------------------------------------------------


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


# -- streaming -----------------------------------------------------------------------------------


@pytest.fixture
async def streamed(client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI) -> httpx.Response:
    """The response to a run started with stream: true."""
    _, thread = await agent_and_thread(client, tenant)
    openai.reply_text("Streaming works one word at a time.")
    return await client.post(
        f"/v1/threads/{thread['id']}/runs", json={"input": "stream please", "stream": True}, headers=tenant.admin
    )


async def test_streaming_delivers_text_deltas_and_the_final_event(streamed: httpx.Response) -> None:
    assert streamed.status_code == 201 and streamed.headers["content-type"].startswith("text/event-stream")
    events = sse_events(streamed.text)
    types = [e["type"] for e in events]
    assert types[0] == "run.created" and types[1] == "run.in_progress" and types[-1] == "run.completed"
    deltas = [e["data"]["text"] for e in events if e["type"] == "message.delta"]
    assert len(deltas) > 1 and "".join(deltas) == "Streaming works one word at a time."


async def test_streamed_events_are_numbered_in_order_and_name_their_run(streamed: httpx.Response) -> None:
    events = sse_events(streamed.text)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert all(e["run_id"] == events[0]["run_id"] for e in events)


async def test_the_events_of_a_run_are_replayed(
    client: httpx.AsyncClient, tenant: Tenant, streamed: httpx.Response
) -> None:
    events = sse_events(streamed.text)
    replay = sse_events((await client.get(f"/v1/runs/{events[0]['run_id']}/events", headers=tenant.admin)).text)
    assert [e["type"] for e in replay] == [e["type"] for e in events]


async def test_a_replay_resumes_after_the_last_event_id(
    client: httpx.AsyncClient, tenant: Tenant, streamed: httpx.Response
) -> None:
    run_id = sse_events(streamed.text)[0]["run_id"]
    later = sse_events(
        (await client.get(f"/v1/runs/{run_id}/events", headers=tenant.admin | {"Last-Event-ID": "2"})).text
    )
    assert later[0]["seq"] == 3


# -- idempotency, listing, input -----------------------------------------------------------------


async def test_the_same_idempotency_key_gives_the_same_run(client: httpx.AsyncClient, tenant: Tenant) -> None:
    _, thread = await agent_and_thread(client, tenant, model="threadline-offline")
    body = {"input": "once", "idempotency_key": "req-42"}
    first = await client.post(f"/v1/threads/{thread['id']}/runs", json=body, headers=tenant.admin)
    await settle(client, tenant, first.json()["id"])
    second = await client.post(f"/v1/threads/{thread['id']}/runs", json=body, headers=tenant.admin)
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["id"] == second.json()["id"]
    assert [m["role"] for m in await messages(client, tenant, thread)] == ["user", "assistant"]


@dataclass
class TwoRuns:
    agent: Json
    thread: Json
    runs: list[Json]


@pytest.fixture
async def two_runs(client: httpx.AsyncClient, tenant: Tenant) -> TwoRuns:
    """Two completed runs of one agent in one thread."""
    agent, thread = await agent_and_thread(client, tenant, model="threadline-offline")
    runs = []
    for text in ("one", "two"):
        run = await start(client, tenant, thread, input=text)
        await settle(client, tenant, run["id"])
        runs.append(run)
    return TwoRuns(agent, thread, runs)


async def test_the_runs_of_a_thread_are_listed_oldest_first(
    client: httpx.AsyncClient, tenant: Tenant, two_runs: TwoRuns
) -> None:
    by_thread = (await client.get(f"/v1/threads/{two_runs.thread['id']}/runs", headers=tenant.admin)).json()
    assert [r["id"] for r in by_thread["data"]] == [r["id"] for r in two_runs.runs]


async def test_runs_are_filtered_by_agent_and_status(
    client: httpx.AsyncClient, tenant: Tenant, two_runs: TwoRuns
) -> None:
    agent_id = two_runs.agent["id"]
    completed = await client.get("/v1/runs", params={"agent_id": agent_id, "status": "completed"}, headers=tenant.admin)
    assert len(completed.json()["data"]) == 2
    failed = await client.get("/v1/runs", params={"status": "failed", "agent_id": agent_id}, headers=tenant.admin)
    assert failed.json()["data"] == []


async def test_without_tracing_a_run_has_no_trace_link(
    client: httpx.AsyncClient, tenant: Tenant, two_runs: TwoRuns
) -> None:
    run = (await client.get(f"/v1/runs/{two_runs.runs[0]['id']}", headers=tenant.admin)).json()
    assert run["trace_id"] is None and run["trace_url"] is None


async def test_runs_are_filtered_by_creation_time_page_by_page(
    client: httpx.AsyncClient, tenant: Tenant, two_runs: TwoRuns
) -> None:
    third = await start(client, tenant, two_runs.thread, input="three")
    await settle(client, tenant, third["id"])
    first, second = two_runs.runs
    ids = [r["id"] for r in (first, second, third)]
    window = {"agent_id": two_runs.agent["id"], "status": "completed"}

    async def listed(**params: Any) -> list[str]:
        found: list[str] = []
        cursor = None
        while True:
            page_params = {**window, **params, "limit": 1, **({"cursor": cursor} if cursor else {})}
            page = await client.get("/v1/runs", params=page_params, headers=tenant.admin)
            assert page.status_code == 200, page.text
            found += [r["id"] for r in page.json()["data"]]
            cursor = page.json()["next_cursor"]
            if cursor is None:
                return found

    assert await listed(created_after=second["created_at"]) == ids[1:]
    assert await listed(created_before=second["created_at"]) == ids[:1]
    assert await listed(created_after=second["created_at"], created_before=third["created_at"]) == ids[1:2]
    # The same instant written with another offset is the same bound.
    shifted = datetime.fromisoformat(second["created_at"]).astimezone(timezone(timedelta(hours=-5))).isoformat()
    assert await listed(created_after=shifted) == ids[1:]


@pytest.mark.parametrize(
    "params",
    [
        {"created_after": "yesterday"},
        {"created_before": "2026-13-01T00:00:00Z"},
        {"created_after": "2026-01-02T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"},
        {"created_before": "0001-01-01T00:00:00+11:00"},
    ],
    ids=["not a time", "no such month", "window ends before it starts", "before the first day in UTC"],
)
async def test_a_bad_creation_time_filter_is_refused(
    client: httpx.AsyncClient, tenant: Tenant, params: dict[str, str]
) -> None:
    response = await client.get("/v1/runs", params=params, headers=tenant.admin)
    assert response.status_code == 422, response.text
    assert set(response.json()) == {"error", "detail"}


async def test_an_unknown_status_filter_is_refused(client: httpx.AsyncClient, tenant: Tenant) -> None:
    assert (await client.get("/v1/runs", params={"status": "sleeping"}, headers=tenant.admin)).status_code == 422


async def test_a_run_needs_an_agent(client: httpx.AsyncClient, tenant: Tenant) -> None:
    thread = (await client.post("/v1/threads", json={}, headers=tenant.admin)).json()
    no_agent = await client.post(f"/v1/threads/{thread['id']}/runs", json={"input": "x"}, headers=tenant.admin)
    assert no_agent.status_code == 422 and "agent" in no_agent.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        {"input": ""},
        {"input": 5},
        {"tools": [{"name": "has spaces"}]},
        {"tools": [{"name": "a"}, {"name": "a"}]},
        {"stream": "yes"},
        {"surprise": 1},
    ],
    ids=["empty input", "input not text", "tool name with spaces", "tool twice", "stream not boolean", "unknown field"],
)
async def test_run_input_is_checked(client: httpx.AsyncClient, tenant: Tenant, body: Json) -> None:
    _, thread = await agent_and_thread(client, tenant, model="threadline-offline")
    response = await client.post(f"/v1/threads/{thread['id']}/runs", json=body, headers=tenant.admin)
    assert response.status_code == 422, body
