"""Elicitation inside runs: an integrated MCP server (2026-07-28, built with the `mcp` SDK) answers a tool call
with questions for the user; the run waits (`requires_action`), the user's answers are checked against the
question's form, and the call is made again with them, from the stored state, even by a server process
started after the one that asked."""

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import mcp_types as types
import pytest

from application.runs.ask_agent import NEEDS_ANSWERS
from domain.ids import RunId
from infrastructure.container import Container
from infrastructure.settings import Settings
from infrastructure.tracing import LangfuseTracer
from tests.conftest import Tenant
from tests.databases import fresh_database, off_the_loop
from tests.e2e.runs import agent_and_thread, messages, settle, sse_events, start
from tests.e2e.test_mcp_server import mcp_client, publish_agent, text_of
from tests.fakes.mcp_server import PARTY, FakeMcpServer
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall
from tests.fakes.otlp_receiver import OtlpReceiver
from tests.mcp_servers import everything
from tests.servers import organization_headers, threadline, threadline_serve

pytestmark = pytest.mark.executors


@pytest.fixture(scope="module")
async def asking_server() -> AsyncIterator[FakeMcpServer]:
    async with FakeMcpServer(asks=True) as server:
        yield server


async def _asking_thread(
    client: httpx.AsyncClient, tenant: Tenant, server: FakeMcpServer
) -> tuple[dict[str, Any], dict[str, Any]]:
    integration = await client.post(
        "/v1/mcp-integrations", json={"name": "Tables", "url": server.url}, headers=tenant.admin
    )
    assert integration.status_code == 201, integration.text
    return await agent_and_thread(client, tenant, mcp_integration_ids=[integration.json()["id"]])


async def test_a_tool_whose_server_asks_waits_for_the_users_answer_then_goes_on_with_it(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, asking_server: FakeMcpServer
) -> None:
    _, thread = await _asking_thread(client, tenant, asking_server)
    openai.reply_tool_calls(FakeToolCall("tables__reserve", {"restaurant": "Chez Ada"}, id="call_res"))
    openai.reply_text("Your table is booked.")

    streamed = await client.post(
        f"/v1/threads/{thread['id']}/runs", json={"input": "Book Chez Ada", "stream": True}, headers=tenant.admin
    )

    events = sse_events(streamed.text)
    assert events[-1]["type"] == "run.requires_action"
    question = {
        "id": "call_res:party",
        "type": "elicitation",
        "tool_call_id": "call_res",
        "tool_name": "tables__reserve",
        "message": "How many guests at Chez Ada?",
        "requested_schema": PARTY,
    }
    assert events[-1]["data"]["elicitations"] == [question]
    assert "tool_call.completed" not in [e["type"] for e in events]
    run = (await client.get(f"/v1/runs/{events[-1]['run_id']}", headers=tenant.admin)).json()
    assert run["status"] == "requires_action"
    assert run["required_action"] == {"type": "elicitation", "tool_calls": [], "elicitations": [question]}
    assert run["steps"][0]["tool_calls"][0]["pending"] is True
    assert len(openai.requests) == 1  # the model is not called before the answer

    answers = f"/v1/runs/{run['id']}/answers"
    wrong = await client.post(
        answers,
        json={"answers": [{"elicitation_id": "call_res:party", "action": "accept", "content": {"guests": "four"}}]},
        headers=tenant.admin,
    )
    assert wrong.status_code == 422
    assert wrong.json()["detail"] == "elicitation call_res:party: name is required; guests must be an integer"
    unknown = await client.post(
        answers, json={"answers": [{"elicitation_id": "call_res:other", "action": "decline"}]}, headers=tenant.admin
    )
    assert unknown.status_code == 409
    assert "the run did not ask these questions: call_res:other" in unknown.json()["detail"]
    results = await client.post(
        f"/v1/runs/{run['id']}/tool-results",
        json={"tool_results": [{"tool_use_id": "call_res", "result": "4"}]},
        headers=tenant.admin,
    )
    assert results.status_code == 409
    assert results.json()["detail"] == "the run waits for answers to its questions, not for tool results"
    assert (await client.get(f"/v1/runs/{run['id']}", headers=tenant.admin)).json()["status"] == "requires_action"

    answered = await client.post(
        answers,
        json={
            "answers": [
                {"elicitation_id": "call_res:party", "action": "accept", "content": {"guests": 4, "name": "Ada"}}
            ],
            "stream": True,
        },
        headers=tenant.admin,
    )

    assert answered.status_code == 200
    after = sse_events(answered.text)
    assert after[-1]["type"] == "run.completed"
    completed = next(e["data"] for e in after if e["type"] == "tool_call.completed")
    assert completed["result"] == "Table for 4 at Chez Ada, name Ada"
    assert asking_server.answers[-1] == {"party": {"action": "accept", "content": {"guests": 4, "name": "Ada"}}}
    final = (await client.get(f"/v1/runs/{run['id']}", headers=tenant.admin)).json()
    assert final["status"] == "completed" and final["required_action"] is None
    assert final["steps"][0]["tool_calls"][0]["pending"] is False
    assert openai.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_res",
        "content": "Table for 4 at Chez Ada, name Ada",
    }
    thread_messages = await messages(client, tenant, thread)
    assert [m["role"] for m in thread_messages] == ["user", "assistant", "tool", "assistant"]


async def test_a_declined_question_is_told_to_the_model(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, asking_server: FakeMcpServer
) -> None:
    _, thread = await _asking_thread(client, tenant, asking_server)
    openai.reply_tool_calls(FakeToolCall("tables__reserve", {"restaurant": "Luigi's"}, id="call_decl"))
    openai.reply_text("No table then.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="Book Luigi's"))["id"])
    assert run["status"] == "requires_action"

    with_content = await client.post(
        f"/v1/runs/{run['id']}/answers",
        json={"answers": [{"elicitation_id": "call_decl:party", "action": "decline", "content": {"guests": 2}}]},
        headers=tenant.admin,
    )
    assert with_content.status_code == 422
    assert with_content.json()["detail"] == "elicitation call_decl:party: content goes only with accept, not decline"
    declined = await client.post(
        f"/v1/runs/{run['id']}/answers",
        json={"answers": [{"elicitation_id": "call_decl:party", "action": "decline"}]},
        headers=tenant.admin,
    )
    assert declined.status_code == 200, declined.text

    assert (await settle(client, tenant, run["id"]))["status"] == "completed"
    assert openai.requests[-1]["messages"][-1]["content"] == "No table reserved: the user chose decline"


async def test_a_tool_that_asks_outside_a_run_is_refused_clearly(
    client: httpx.AsyncClient, tenant: Tenant, asking_server: FakeMcpServer
) -> None:
    integration = (
        await client.post(
            "/v1/mcp-integrations", json={"name": "Direct", "url": asking_server.url}, headers=tenant.admin
        )
    ).json()
    called = await client.post(
        f"/v1/mcp-integrations/{integration['id']}/tools/reserve/call",
        json={"arguments": {"restaurant": "Chez Ada"}},
        headers=tenant.admin,
    )
    assert called.status_code == 409
    assert called.json() == {
        "error": "McpInputNeeded",
        "detail": "tool 'reserve' asks for the user's input (How many guests at Chez Ada?): call it in a run, "
        "which waits for the answers",
    }


async def _served_database(url: str, model: FakeOpenAI, tmp_path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The environment of `threadline serve` processes on a migrated database, and an admin's auth header."""
    env = os.environ | {
        "THREADLINE_DATABASE_URL": url,
        "THREADLINE_EXECUTOR": "in_process",
        "THREADLINE_DATABASE_POOL_SIZE": "4",
        "THREADLINE_LOG_FORMAT": "text",
        "THREADLINE_OPENAI_API_KEY": "sk-test",
        "THREADLINE_OPENAI_BASE_URL": model.base_url,
        "THREADLINE_DATA_DIR": str(tmp_path / "data"),
        "THREADLINE_SECRET_KEY": "questions test key",
        "THREADLINE_MCP_ALLOWED_NETWORKS": "127.0.0.0/8",  # the MCP servers of the tests run on loopback
    }
    await threadline(env, "migrate")
    return env, await organization_headers(env, "Questions")


async def _thread_of_an_agent_using(http: httpx.AsyncClient, mcp_url: str) -> str:
    """An agent with an integration of the MCP server at `mcp_url`, and a thread of it: its runs' path."""
    integration = await http.post("/v1/mcp-integrations", json={"name": "Asking", "url": mcp_url})
    assert integration.status_code == 201, integration.text
    agent = await http.post(
        "/v1/agents", json={"name": "Host", "model": "gpt-test", "mcp_integration_ids": [integration.json()["id"]]}
    )
    thread = await http.post("/v1/threads", json={"agent_id": agent.json()["id"]})
    return f"/v1/threads/{thread.json()['id']}/runs"


async def test_the_answer_is_carried_on_by_a_server_started_after_the_one_that_asked(tmp_path: Path) -> None:
    async with (
        off_the_loop(fresh_database(tmp_path)) as url,
        FakeOpenAI() as model,
        FakeMcpServer(asks=True) as tables,
    ):
        env, headers = await _served_database(url, model, tmp_path)
        model.reply_tool_calls(FakeToolCall("asking__reserve", {"restaurant": "Chez Ada"}, id="call_later"))
        model.reply_text("Booked.")
        async with threadline_serve(env) as (base_url, first):
            async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as http:
                runs = await _thread_of_an_agent_using(http, tables.url)
                streamed = await http.post(runs, json={"input": "Book it", "stream": True})
                assert sse_events(streamed.text)[-1]["type"] == "run.requires_action"
                run_id = sse_events(streamed.text)[-1]["run_id"]
            first.terminate()
            await first.wait()

        async with (
            threadline_serve(env) as (base_url, _second),
            httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as http,
        ):
            waiting = (await http.get(f"/v1/runs/{run_id}")).json()
            assert waiting["status"] == "requires_action"
            answer = {"elicitation_id": "call_later:party", "action": "accept", "content": {"guests": 2, "name": "Bo"}}
            answered = await http.post(f"/v1/runs/{run_id}/answers", json={"answers": [answer], "stream": True})
            events = sse_events(answered.text)
            assert events[-1]["type"] == "run.completed", answered.text
            result = next(e["data"]["result"] for e in events if e["type"] == "tool_call.completed")
            assert result == "Table for 2 at Chez Ada, name Bo"
            assert (await http.get(f"/v1/runs/{run_id}")).json()["status"] == "completed"


async def test_chat_completions_tells_where_to_answer_a_question_it_cannot_carry(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, asking_server: FakeMcpServer
) -> None:
    agent, _ = await _asking_thread(client, tenant, asking_server)
    openai.reply_tool_calls(FakeToolCall("tables__reserve", {"restaurant": "Chez Ada"}, id="call_chat"))
    body = {"model": agent["slug"], "messages": [{"role": "user", "content": "Book Chez Ada"}]}

    answered = await client.post("/v1/chat/completions", json=body, headers=tenant.admin)

    assert answered.status_code == 409
    error = answered.json()["error"]
    assert error["code"] == "requires_answers"
    run = (await client.get("/v1/runs", headers=tenant.admin)).json()["data"][0]
    assert run["status"] == "requires_action"
    assert error["message"].endswith(f"answer them with POST /v1/runs/{run['id']}/answers")


async def test_a_streamed_chat_completion_ends_with_where_to_answer_the_question(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, asking_server: FakeMcpServer
) -> None:
    agent, _ = await _asking_thread(client, tenant, asking_server)
    openai.reply_tool_calls(FakeToolCall("tables__reserve", {"restaurant": "Chez Ada"}, id="call_chat"))
    body = {"model": agent["slug"], "messages": [{"role": "user", "content": "Book Chez Ada"}], "stream": True}

    streamed = await client.post("/v1/chat/completions", json=body, headers=tenant.admin)

    frames = [line.removeprefix("data: ") for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert frames[-1] == "[DONE]"
    error = json.loads(frames[-2])["error"]
    assert error["code"] == "requires_answers"
    assert error["type"] == "invalid_request_error"
    run = (await client.get("/v1/runs", headers=tenant.admin)).json()["data"][0]
    assert error["message"].endswith(f"answer them with POST /v1/runs/{run['id']}/answers")


async def test_the_trace_shows_the_call_waiting_for_the_answers_and_carried_on_with_them(
    client: httpx.AsyncClient,
    tenant: Tenant,
    openai: FakeOpenAI,
    asking_server: FakeMcpServer,
    traced: tuple[LangfuseTracer, OtlpReceiver],
) -> None:
    tracer, receiver = traced
    _, thread = await _asking_thread(client, tenant, asking_server)
    openai.reply_tool_calls(FakeToolCall("tables__reserve", {"restaurant": "Chez Ada"}, id="call_traced"))
    openai.reply_text("Booked.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="Book it"))["id"])
    answer = {"elicitation_id": "call_traced:party", "action": "accept", "content": {"guests": 3, "name": "Cy"}}
    await client.post(f"/v1/runs/{run['id']}/answers", json={"answers": [answer]}, headers=tenant.admin)
    assert (await settle(client, tenant, run["id"]))["status"] == "completed"
    await tracer.flush()

    spans = await receiver.wait_for_spans(6)  # two executions: each a run root; 2 generations, 2 tool call spans

    waited, carried_on = [s for s in spans if s.name == "mcp_tool_call"]
    assert waited.attributes["langfuse.observation.output"] == "waiting for the user's answers"
    assert waited.json_attribute("langfuse.observation.metadata.questions") == [
        {"key": "party", "message": "How many guests at Chez Ada?"}
    ]
    assert carried_on.json_attribute("langfuse.observation.metadata.answers") == {"party": "accept"}
    assert carried_on.attributes["langfuse.observation.output"] == "Table for 3 at Chez Ada, name Cy"
    assert len({s.trace_id for s in spans}) == 1


# -- a handshake-era server that asks during the call (server-everything, `elicitation/create`) ----------------


async def _everything_asks(client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI) -> dict[str, Any]:
    """A run whose model calls server-everything's elicitation tool: the run, once it waits for the answer."""
    everything.require_everything()
    integration = await client.post(
        "/v1/mcp-integrations",
        json={"name": "Everything", "transport": "stdio", "server": "everything"},
        headers=tenant.admin,
    )
    assert integration.status_code == 201, integration.text
    _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[integration.json()["id"]])
    openai.reply_tool_calls(FakeToolCall("everything__trigger-elicitation-request", {}, id="call_ask"))
    openai.reply_text("Thanks.")
    return await settle(client, tenant, (await start(client, tenant, thread, input="Ask me"))["id"])


async def test_a_question_asked_during_the_call_waits_for_the_users_answer(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    waiting = await _everything_asks(client, tenant, openai)

    assert waiting["status"] == "requires_action"
    [question] = waiting["required_action"]["elicitations"]
    assert question["tool_call_id"] == "call_ask"
    assert question["message"] == "Please provide inputs for the following fields:"
    assert question["requested_schema"]["required"] == ["name"]
    answers = f"/v1/runs/{waiting['id']}/answers"
    wrong = {"elicitation_id": question["id"], "action": "accept", "content": {"name": "Ada", "email": "ada"}}
    refused = await client.post(answers, json={"answers": [wrong]}, headers=tenant.admin)
    assert refused.status_code == 422
    assert refused.json()["detail"] == f"elicitation {question['id']}: email must be an email address"

    content = {"name": "Ada Lovelace", "check": True, "email": "ada@example.org", "integer": 7}
    answer = {"elicitation_id": question["id"], "action": "accept", "content": content}
    answered = await client.post(answers, json={"answers": [answer], "stream": True}, headers=tenant.admin)

    events = sse_events(answered.text)
    assert events[-1]["type"] == "run.completed", answered.text
    result = next(e["data"]["result"] for e in events if e["type"] == "tool_call.completed")
    assert result.startswith("✅ User provided the requested information!\nUser inputs:\n- Name: Ada Lovelace\n")
    assert "- Email: ada@example.org\n" in result and "- Favorite Integer: 7" in result
    run = (await client.get(f"/v1/runs/{waiting['id']}", headers=tenant.admin)).json()
    assert run["status"] == "completed" and run["steps"][0]["tool_calls"][0]["pending"] is False
    assert len(run["steps"]) == 2


async def test_a_question_declined_during_the_call_is_told_to_the_model(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    waiting = await _everything_asks(client, tenant, openai)
    [question] = waiting["required_action"]["elicitations"]

    declined = await client.post(
        f"/v1/runs/{waiting['id']}/answers",
        json={"answers": [{"elicitation_id": question["id"], "action": "decline"}]},
        headers=tenant.admin,
    )

    assert declined.status_code == 200, declined.text
    assert (await settle(client, tenant, waiting["id"]))["status"] == "completed"
    told = openai.requests[-1]["messages"][-1]
    assert told["role"] == "tool"
    assert told["content"].startswith("❌ User declined to provide the requested information.")


async def test_a_run_cancelled_while_a_question_waits_in_an_open_call_ends_once(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    waiting = await _everything_asks(client, tenant, openai)
    assert waiting["status"] == "requires_action"

    cancelled = await client.post(f"/v1/runs/{waiting['id']}/cancel", headers=tenant.admin)

    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    events = sse_events((await client.get(f"/v1/runs/{waiting['id']}/events", headers=tenant.admin)).text)
    assert [e["type"] for e in events].count("run.cancelled") == 1
    assert len(openai.requests) == 1  # the model was not called again


async def test_a_question_nobody_answers_in_time_is_cancelled_and_the_run_goes_on_with_a_warning(
    client: httpx.AsyncClient,
    tenant: Tenant,
    openai: FakeOpenAI,
    container: Container,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(settings, "question_timeout_seconds", 0.5)  # read as each run starts, by every process
    everything.require_everything()
    integration = await client.post(
        "/v1/mcp-integrations",
        json={"name": "Everything", "transport": "stdio", "server": "everything"},
        headers=tenant.admin,
    )
    _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[integration.json()["id"]])
    openai.reply_tool_calls(FakeToolCall("everything__trigger-elicitation-request", {}, id="call_ask"))
    openai.reply_text("Nobody answered.")
    run_id = (await start(client, tenant, thread, input="Ask me"))["id"]

    async with container.run_event_bus().subscribe(RunId(UUID(run_id))) as events:
        run = (await client.get(f"/v1/runs/{run_id}", headers=tenant.admin)).json()
        while run["status"] in ("queued", "in_progress", "requires_action"):
            await events.next()  # the run moved on: look again
            run = (await client.get(f"/v1/runs/{run_id}", headers=tenant.admin)).json()

    assert run["status"] == "completed"
    assert run["warnings"] == [
        "nobody answered the question of tool call call_ask within 0.5 s: its server was told the user cancelled"
    ]
    told = openai.requests[-1]["messages"][-1]
    assert told["role"] == "tool" and told["tool_call_id"] == "call_ask"
    assert told["content"].startswith("⚠️ User cancelled the elicitation dialog.")  # server-everything, on a cancel
    kinds = [e["type"] for e in sse_events((await client.get(f"/v1/runs/{run_id}/events", headers=tenant.admin)).text)]
    assert kinds.index("run.requires_action") < kinds.index("tool_call.completed") < kinds.index("run.completed")


# -- a published agent whose run asks, called over /mcp ------------------------------------------------------


async def _published_asking_agent(client: httpx.AsyncClient, tenant: Tenant, server: FakeMcpServer) -> None:
    integration = await client.post(
        "/v1/mcp-integrations", json={"name": "Tables", "url": server.url}, headers=tenant.admin
    )
    assert integration.status_code == 201, integration.text
    agent = await publish_agent(
        client,
        tenant,
        slug="host",
        name="Host",
        model="gpt-test",
        mcp_integration_ids=[integration.json()["id"]],
    )
    assert agent["publish_as_mcp"] is True


async def test_a_2026_client_of_a_published_agent_answers_its_runs_question_and_calls_again(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant, openai: FakeOpenAI, asking_server: FakeMcpServer
) -> None:
    await _published_asking_agent(client, tenant, asking_server)
    openai.reply_tool_calls(FakeToolCall("tables__reserve", {"restaurant": "Chez Ada"}, id="call_mcp"))
    openai.reply_text("Booked for 5.")

    async with mcp_client(live_url, tenant, mode="2026-07-28") as mcp:
        asked = await mcp.session.call_tool("host", {"input": "Book Chez Ada"}, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult)
        assert asked.input_requests is not None
        [(key, request)] = asked.input_requests.items()
        assert key == "call_mcp:party"
        assert isinstance(request, types.ElicitRequest)
        assert request.params.message == "How many guests at Chez Ada?"
        run_id = (asked.request_state or "").removeprefix("threadline-run:")
        assert (await client.get(f"/v1/runs/{run_id}", headers=tenant.admin)).json()["status"] == "requires_action"

        answer = types.ElicitResult(action="accept", content={"guests": 5, "name": "Ed"})
        done = await mcp.session.call_tool(
            "host",
            {"input": "Book Chez Ada"},
            input_responses={key: answer},
            request_state=asked.request_state,
            allow_input_required=True,
        )

    assert isinstance(done, types.CallToolResult) and not done.is_error
    assert text_of(done.content[0]) == "Booked for 5."
    assert openai.requests[-1]["messages"][-1]["content"] == "Table for 5 at Chez Ada, name Ed"
    assert (await client.get(f"/v1/runs/{run_id}", headers=tenant.admin)).json()["status"] == "completed"


async def test_a_handshake_era_client_of_a_published_agent_is_asked_during_the_call(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant, openai: FakeOpenAI, asking_server: FakeMcpServer
) -> None:
    await _published_asking_agent(client, tenant, asking_server)
    openai.reply_tool_calls(FakeToolCall("tables__reserve", {"restaurant": "Luigi's"}, id="call_old"))
    openai.reply_text("Booked for 2.")
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"guests": 2, "name": "Flo"})

    async with mcp_client(live_url, tenant, mode="legacy", elicitation_callback=answer) as mcp:
        done = await mcp.call_tool("host", {"input": "Book Luigi's"})

    assert asked == ["How many guests at Luigi's?"]
    assert not done.is_error and text_of(done.content[0]) == "Booked for 2."
    assert openai.requests[-1]["messages"][-1]["content"] == "Table for 2 at Luigi's, name Flo"


async def test_a_client_that_cannot_be_asked_gets_a_clear_error_and_the_run_does_not_linger(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant, openai: FakeOpenAI, asking_server: FakeMcpServer
) -> None:
    await _published_asking_agent(client, tenant, asking_server)
    openai.reply_tool_calls(FakeToolCall("tables__reserve", {"restaurant": "Chez Ada"}, id="call_mute"))

    async with mcp_client(live_url, tenant, mode="legacy") as mcp:
        done = await mcp.call_tool("host", {"input": "Book Chez Ada"})

    assert done.is_error and text_of(done.content[0]) == NEEDS_ANSWERS
    assert done.meta is not None
    run = (await client.get(f"/v1/runs/{done.meta['threadline/run_id']}", headers=tenant.admin)).json()
    assert run["status"] == "cancelled"


async def test_the_trace_shows_the_wait_for_a_question_asked_during_the_call(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, traced: tuple[LangfuseTracer, OtlpReceiver]
) -> None:
    tracer, receiver = traced
    waiting = await _everything_asks(client, tenant, openai)
    [question] = waiting["required_action"]["elicitations"]
    answer = {"elicitation_id": question["id"], "action": "accept", "content": {"name": "Gil"}}
    await client.post(f"/v1/runs/{waiting['id']}/answers", json={"answers": [answer]}, headers=tenant.admin)
    assert (await settle(client, tenant, waiting["id"]))["status"] == "completed"
    await tracer.flush()

    asked = await receiver.wait_for_span("user_question")

    assert asked.json_attribute("langfuse.observation.input")["message"] == question["message"]
    assert asked.attributes["langfuse.observation.output"] == "accept"
    assert asked.json_attribute("langfuse.observation.metadata.toolCallId") == "call_ask"
    tool_call = await receiver.wait_for_span("mcp_tool_call")
    assert asked.parent_span_id == tool_call.parent_span_id  # both in the run's trace, under its root


async def test_a_question_whose_open_call_died_with_its_process_ends_the_run_at_the_next_start(
    tmp_path: Path,
) -> None:
    everything.require_everything()
    async with (
        off_the_loop(fresh_database(tmp_path)) as url,
        FakeOpenAI() as model,
        everything.EverythingHttpServer() as asking,
    ):
        env, headers = await _served_database(url, model, tmp_path)
        model.reply_tool_calls(FakeToolCall("asking__trigger-elicitation-request", {}, id="call_lost"))
        async with threadline_serve(env) as (base_url, first):
            async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as http:
                runs = await _thread_of_an_agent_using(http, asking.url)
                streamed = await http.post(runs, json={"input": "Ask", "stream": True})
                waited = sse_events(streamed.text)[-1]
                assert waited["type"] == "run.requires_action"
                [question] = waited["data"]["elicitations"]
            first.kill()  # kill -9: the open call, and the question with it, are gone
            await first.wait()

        async with (
            threadline_serve(env) as (base_url, _second),
            httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as http,
        ):
            run = (await http.get(f"/v1/runs/{waited['run_id']}")).json()
            answer = {"elicitation_id": question["id"], "action": "decline"}
            late = await http.post(f"/v1/runs/{waited['run_id']}/answers", json={"answers": [answer]})

    assert run["status"] == "failed" and run["error"]["code"] == "interrupted"
    assert late.status_code == 409
