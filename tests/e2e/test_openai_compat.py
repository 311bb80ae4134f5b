"""The OpenAI-compatible front door, through the real `openai` SDK (sync and async clients) against Threadline
served on loopback: agents as models, Chat Completions and Responses (streamed and not), an agent that uses
an MCP tool inside the run, the client's function tools, and errors in OpenAI's shape."""

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from dependency_injector import providers
from openai import (
    AsyncOpenAI,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    OpenAI,
)
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam

from infrastructure.container import Container
from infrastructure.llm.router import language_model
from infrastructure.tracing import LangfuseTracer
from tests.conftest import MakeTenant, Tenant
from tests.e2e.runs import messages
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, TextReply
from tests.fakes.otlp_receiver import OtlpReceiver

Json = dict[str, Any]
CITY: dict[str, object] = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {"name": "get_weather", "description": "The weather in a city", "parameters": CITY},
}


def _key(tenant: Tenant) -> str:
    return tenant.admin["Authorization"].removeprefix("Bearer ")


@pytest.fixture
async def aclient(live_url: str, tenant: Tenant) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=f"{live_url}/v1", api_key=_key(tenant), max_retries=0) as sdk:
        yield sdk


@pytest.fixture
def client_sync(live_url: str, tenant: Tenant) -> Iterator[OpenAI]:
    """The sync client: the server runs on the test's event loop, so calls go through asyncio.to_thread."""
    with OpenAI(base_url=f"{live_url}/v1", api_key=_key(tenant), max_retries=0) as sdk:
        yield sdk


async def _agent(client: httpx.AsyncClient, tenant: Tenant, slug: str, **fields: Any) -> Json:
    body = {"name": slug.title(), "slug": slug, "model": "gpt-test", "instructions": "You are helpful."} | fields
    created = await client.post("/v1/agents", json=body, headers=tenant.admin)
    assert created.status_code == 201, created.text
    agent: Json = created.json()
    return agent


async def _run(client: httpx.AsyncClient, tenant: Tenant, run_id: str) -> Json:
    found = await client.get(f"/v1/runs/{run_id}", headers=tenant.admin)
    assert found.status_code == 200, found.text
    run: Json = found.json()
    return run


# -- models --------------------------------------------------------------------------------------------------


async def test_models_are_the_organizations_agents(
    client: httpx.AsyncClient, tenant: Tenant, make_tenant: MakeTenant, aclient: AsyncOpenAI
) -> None:
    await _agent(client, tenant, "support")
    await _agent(client, tenant, "research")
    other = await make_tenant("Other")
    await _agent(client, other, "secret-agent")
    models = [m async for m in aclient.models.list()]
    assert sorted(m.id for m in models) == ["research", "support"]
    assert {m.owned_by for m in models} == {tenant.slug}


async def test_the_sync_client_lists_the_models_too(
    client: httpx.AsyncClient, tenant: Tenant, client_sync: OpenAI
) -> None:
    await _agent(client, tenant, "support")
    listed = await asyncio.to_thread(lambda: [m.id for m in client_sync.models.list()])
    assert listed == ["support"]
    one = await asyncio.to_thread(client_sync.models.retrieve, "support")
    assert one.id == "support" and one.owned_by == tenant.slug


# -- Chat Completions ----------------------------------------------------------------------------------------


async def test_a_chat_completion_is_a_run_of_the_agent(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, client_sync: OpenAI
) -> None:
    await _agent(client, tenant, "support")
    openai.reply_text("Paris is the capital of France.")
    raw = await asyncio.to_thread(
        lambda: client_sync.chat.completions.with_raw_response.create(
            model="support",
            messages=[
                {"role": "system", "content": "Answer in one sentence."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello! How can I help?"},
                {"role": "user", "content": "What is the capital of France?"},
            ],
        )
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "Paris is the capital of France."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "support"
    assert completion.usage is not None and completion.usage.total_tokens > 0
    run = await _run(client, tenant, raw.headers["Threadline-Run-Id"])
    assert run["status"] == "completed" and run["thread_id"] == raw.headers["Threadline-Thread-Id"]
    assert run["usage"]["total_tokens"] == completion.usage.total_tokens
    history = await messages(client, tenant, {"id": run["thread_id"]})
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    sent = openai.requests[0]["messages"]
    assert sent[0] == {"role": "system", "content": "You are helpful.\n\nAnswer in one sentence."}
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "user"]


async def test_system_messages_are_instructions_for_that_run_only(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, aclient: AsyncOpenAI
) -> None:
    agent = await _agent(client, tenant, "support")
    openai.reply_text("Short.")
    await aclient.chat.completions.create(
        model="support", messages=[{"role": "system", "content": "Be short."}, {"role": "user", "content": "Hi"}]
    )
    assert (await client.get(f"/v1/agents/{agent['id']}", headers=tenant.admin)).json()["instructions"] == (
        "You are helpful."
    )
    openai.reply_text("Long.")
    await aclient.chat.completions.create(model="support", messages=[{"role": "user", "content": "Hi"}])
    assert openai.requests[1]["messages"][0] == {"role": "system", "content": "You are helpful."}


async def test_a_streamed_chat_completion_sends_the_text_as_it_comes_then_the_usage(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, aclient: AsyncOpenAI
) -> None:
    await _agent(client, tenant, "support")
    openai.reply_text("One two three four.")
    stream = await aclient.chat.completions.create(
        model="support",
        messages=[{"role": "user", "content": "Count"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "One two three four."
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1  # word by word
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0


async def test_a_streamed_chat_completion_with_the_sync_client(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, client_sync: OpenAI
) -> None:
    await _agent(client, tenant, "support")
    openai.reply_text("Streamed to a thread.")

    def streamed() -> str:
        stream = client_sync.chat.completions.create(
            model="support", messages=[{"role": "user", "content": "Go"}], stream=True
        )
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    assert await asyncio.to_thread(streamed) == "Streamed to a thread."


async def test_an_agent_calls_its_mcp_tool_inside_the_run_and_only_its_answer_shows(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, mcp_server: FakeMcpServer, aclient: AsyncOpenAI
) -> None:
    memo = await client.post("/v1/mcp-integrations", json={"name": "Memo", "url": mcp_server.url}, headers=tenant.admin)
    assert memo.status_code == 201, memo.text
    await _agent(client, tenant, "memo-agent", mcp_integration_ids=[memo.json()["id"]])
    openai.reply_tool_calls(FakeToolCall("memo__echo", {"message": "hi"}))
    openai.reply_text("The echo said hi.")
    raw = await aclient.chat.completions.with_raw_response.create(
        model="memo-agent", messages=[{"role": "user", "content": "Echo hi"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "The echo said hi."
    assert completion.choices[0].message.tool_calls is None and completion.choices[0].finish_reason == "stop"
    run = await _run(client, tenant, raw.headers["Threadline-Run-Id"])
    assert [[c["name"] for c in s["tool_calls"]] for s in run["steps"]] == [["memo__echo"], []]
    tool_messages = [m for m in openai.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["Echo: hi"]


async def test_a_function_tool_of_the_request_pauses_the_run_and_the_tool_message_resumes_it(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, aclient: AsyncOpenAI
) -> None:
    await _agent(client, tenant, "support")
    openai.reply_tool_calls(FakeToolCall("get_weather", {"city": "Paris"}))
    conversation: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    first = await aclient.chat.completions.with_raw_response.create(
        model="support", messages=conversation, tools=[WEATHER]
    )
    paused = first.parse().choices[0]
    assert paused.finish_reason == "tool_calls"
    assert paused.message.tool_calls is not None
    call = paused.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    run_id = first.headers["Threadline-Run-Id"]
    assert (await _run(client, tenant, run_id))["status"] == "requires_action"

    openai.reply_text("It is sunny in Paris.")
    conversation += [
        paused.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24°C"},
    ]
    second = await aclient.chat.completions.with_raw_response.create(
        model="support", messages=conversation, tools=[WEATHER]
    )
    assert second.parse().choices[0].message.content == "It is sunny in Paris."
    assert second.headers["Threadline-Run-Id"] == run_id  # the same run went on
    assert (await _run(client, tenant, run_id))["status"] == "completed"
    assert openai.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24°C"}


async def test_a_streamed_chat_completion_carries_the_function_tool_calls(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, aclient: AsyncOpenAI
) -> None:
    await _agent(client, tenant, "support")
    openai.reply_tool_calls(FakeToolCall("get_weather", {"city": "Oslo"}))
    stream = await aclient.chat.completions.create(
        model="support", messages=[{"role": "user", "content": "Weather?"}], tools=[WEATHER], stream=True
    )
    chunks = [chunk async for chunk in stream]
    calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
    assert [(t.function.name, t.function.arguments) for t in calls if t.function] == [
        ("get_weather", '{"city": "Oslo"}')
    ]
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


async def test_the_same_idempotency_key_gives_back_the_same_run(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, aclient: AsyncOpenAI
) -> None:
    await _agent(client, tenant, "support")
    openai.reply_text("Only once.")
    ask: Any = {"model": "support", "messages": [{"role": "user", "content": "Once"}]}
    headers = {"Idempotency-Key": "ask-once"}
    first = await aclient.chat.completions.with_raw_response.create(**ask, extra_headers=headers)
    again = await aclient.chat.completions.with_raw_response.create(**ask, extra_headers=headers)
    assert first.headers["Threadline-Run-Id"] == again.headers["Threadline-Run-Id"]
    assert again.parse().choices[0].message.content == "Only once."
    assert len(openai.requests) == 1


# -- Responses -----------------------------------------------------------------------------------------------


async def test_responses_continue_the_same_thread_with_previous_response_id(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, client_sync: OpenAI
) -> None:
    await _agent(client, tenant, "support")
    openai.reply_text("Nice to meet you, Ada.")
    first = await asyncio.to_thread(
        client_sync.responses.with_raw_response.create, model="support", input="My name is Ada."
    )
    response = first.parse()
    assert response.output_text == "Nice to meet you, Ada." and response.status == "completed"
    assert response.usage is not None and response.usage.total_tokens > 0
    openai.reply_text("Your name is Ada.")
    second = await asyncio.to_thread(
        lambda: client_sync.responses.with_raw_response.create(
            model="support",
            input=[{"role": "user", "content": "What is my name?"}],
            instructions="Answer briefly.",
            previous_response_id=response.id,
        )
    )
    assert second.parse().output_text == "Your name is Ada."
    assert second.headers["Threadline-Thread-Id"] == first.headers["Threadline-Thread-Id"]
    assert second.headers["Threadline-Run-Id"] != first.headers["Threadline-Run-Id"]
    sent = openai.requests[1]["messages"]
    assert sent[0]["content"] == "You are helpful.\n\nAnswer briefly."
    assert [m["content"] for m in sent[1:]] == ["My name is Ada.", "Nice to meet you, Ada.", "What is my name?"]


async def test_responses_continuing_one_response_at_once_take_its_thread_in_turn(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, aclient: AsyncOpenAI
) -> None:
    """Requests that continue the same response at the same moment: each is answered, or refused as a conflict
    (thread_busy) while another's run has not ended, and leaves nothing in the thread; the thread holds the runs
    answered, one turn after the other."""
    await _agent(client, tenant, "support")
    openai.responder = lambda body: TextReply("Noted.")
    first = await aclient.responses.create(model="support", input="Remember this.")

    async def again(i: int) -> str | None:
        try:
            continued = await aclient.responses.create(
                model="support", input=f"turn {i}", previous_response_id=first.id
            )
        except ConflictError as refused:
            assert isinstance(refused.body, dict) and refused.body["code"] == "thread_busy", refused.body
            return None
        assert continued.output_text == "Noted."
        return continued.id

    answered = [r for r in await asyncio.gather(*(again(i) for i in range(8))) if r is not None]
    assert answered
    [thread] = (await client.get("/v1/threads", headers=tenant.admin)).json()["data"]
    runs = (await client.get(f"/v1/threads/{thread['id']}/runs", headers=tenant.admin)).json()["data"]
    assert len(runs) == 1 + len(answered) and all(r["status"] == "completed" for r in runs)
    roles = [m["role"] for m in await messages(client, tenant, thread)]
    assert roles == ["user", "assistant"] * (1 + len(answered))


async def test_a_streamed_response_sends_the_responses_events(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, aclient: AsyncOpenAI
) -> None:
    await _agent(client, tenant, "support")
    openai.reply_text("Hello from the stream.")
    first = await aclient.responses.create(model="support", input="Hi", stream=True)
    events = [event async for event in first]
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "Hello from the stream." and len(deltas) > 1
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == "Hello from the stream."
    openai.reply_text("Still here.")
    follow_up = await aclient.responses.create(
        model="support", input="Again", previous_response_id=completed.response.id, stream=True
    )
    last = [event async for event in follow_up][-1]
    assert last.type == "response.completed" and last.response.output_text == "Still here."
    assert [m["role"] for m in openai.requests[1]["messages"][1:]] == ["user", "assistant", "user"]


async def test_a_function_tool_round_trip_through_responses(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, aclient: AsyncOpenAI
) -> None:
    await _agent(client, tenant, "support")
    openai.reply_tool_calls(FakeToolCall("get_weather", {"city": "Rome"}))
    tool: FunctionToolParam = {"type": "function", "name": "get_weather", "parameters": CITY, "strict": False}
    first = await aclient.responses.with_raw_response.create(model="support", input="Weather?", tools=[tool])
    paused = first.parse()
    calls = [item for item in paused.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Rome"})]
    openai.reply_text("Rome is warm.")
    second = await aclient.responses.with_raw_response.create(
        model="support",
        previous_response_id=paused.id,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "warm"}],
    )
    assert second.parse().output_text == "Rome is warm."
    assert second.headers["Threadline-Run-Id"] == first.headers["Threadline-Run-Id"]
    assert second.parse().id != paused.id
    assert openai.requests[1]["messages"][-1]["content"] == "warm"


# -- every call is a run -------------------------------------------------------------------------------------


async def test_a_chat_completion_is_listed_with_the_runs_and_traced(
    client: httpx.AsyncClient,
    tenant: Tenant,
    openai: FakeOpenAI,
    aclient: AsyncOpenAI,
    traced: tuple[LangfuseTracer, OtlpReceiver],
) -> None:
    tracer, receiver = traced
    openai.reply_text("Traced.")
    await _agent(client, tenant, "support")
    raw = await aclient.chat.completions.with_raw_response.create(
        model="support", messages=[{"role": "user", "content": "Hi"}]
    )
    run_id, thread_id = raw.headers["Threadline-Run-Id"], raw.headers["Threadline-Thread-Id"]
    listed = (await client.get("/v1/runs", params={"thread_id": thread_id}, headers=tenant.admin)).json()["data"]
    assert [r["id"] for r in listed] == [run_id]
    thread = (await client.get(f"/v1/threads/{thread_id}", headers=tenant.admin)).json()
    assert thread["metadata"] == {"api": "chat.completions"} and thread["title"] == "Hi"
    await tracer.flush()
    root = await receiver.wait_for_span("run")
    assert root.attributes["session.id"] == thread_id
    assert root.json_attribute("langfuse.trace.metadata.run_id") == run_id
    assert (await _run(client, tenant, run_id))["trace_id"] == root.trace_id


async def test_a_streamed_chat_completion_ends_with_an_error_when_its_run_is_cancelled(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, live_url: str
) -> None:
    await _agent(client, tenant, "support")
    held = openai.hold()
    body = {"model": "support", "messages": [{"role": "user", "content": "Take your time"}], "stream": True}
    async with (
        httpx.AsyncClient(base_url=live_url, headers=tenant.admin, timeout=60) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as stream,
    ):
        run_id = stream.headers["Threadline-Run-Id"]
        await held.received.wait()
        cancelled = await client.post(f"/v1/runs/{run_id}/cancel", headers=tenant.admin)
        assert cancelled.json()["status"] == "cancelled"
        lines = [line async for line in stream.aiter_lines() if line.startswith("data: ")]
    assert json.loads(lines[-2].removeprefix("data: "))["error"]["code"] == "cancelled"
    assert lines[-1] == "data: [DONE]"
    await held.abandoned.wait()


async def test_a_chat_completion_whose_run_is_cancelled_is_a_conflict_the_sdk_does_not_retry(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, live_url: str
) -> None:
    await _agent(client, tenant, "support")
    held = openai.hold()
    async with AsyncOpenAI(base_url=f"{live_url}/v1", api_key=_key(tenant), max_retries=2) as sdk:
        asked = asyncio.ensure_future(
            sdk.chat.completions.create(model="support", messages=[{"role": "user", "content": "Take your time"}])
        )
        await held.received.wait()
        [run] = (await client.get("/v1/runs", headers=tenant.admin)).json()["data"]
        assert (await client.post(f"/v1/runs/{run['id']}/cancel", headers=tenant.admin)).status_code == 200
        with pytest.raises(ConflictError) as raised:
            await asked
    assert raised.value.status_code == 409  # someone cancelled it: not a failure of this server
    assert isinstance(raised.value.body, dict) and raised.value.body["code"] == "cancelled"
    runs = (await client.get("/v1/runs", headers=tenant.admin)).json()["data"]
    assert [r["status"] for r in runs] == ["cancelled"]  # one run: the SDK did not ask again
    await held.abandoned.wait()


async def test_a_client_that_leaves_a_streamed_chat_completion_cancels_its_run(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, aclient: AsyncOpenAI
) -> None:
    await _agent(client, tenant, "support")
    held = openai.hold(first_text="Let me think")
    stream = await aclient.chat.completions.with_raw_response.create(
        model="support", messages=[{"role": "user", "content": "Take your time"}], stream=True
    )
    run_id = stream.headers["Threadline-Run-Id"]
    chunks = stream.parse()
    async for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            break  # the first words are there: the user presses stop
    await chunks.close()

    async with asyncio.timeout(60):  # the run ends: its events end
        events = await client.get(f"/v1/runs/{run_id}/events", headers=tenant.admin)
    assert events.status_code == 200
    assert (await _run(client, tenant, run_id))["status"] == "cancelled"
    await held.abandoned.wait()  # the model call was stopped too


async def test_a_failed_run_is_an_error_the_sdk_does_not_retry(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, live_url: str
) -> None:
    await _agent(client, tenant, "support")
    openai.reply_error(400, "this model does not exist")
    async with AsyncOpenAI(base_url=f"{live_url}/v1", api_key=_key(tenant), max_retries=2) as sdk:
        with pytest.raises(InternalServerError) as raised:
            await sdk.chat.completions.create(model="support", messages=[{"role": "user", "content": "Hi"}])
    assert raised.value.status_code == 502  # the provider refused: the fault is upstream, not this server's
    assert isinstance(raised.value.body, dict) and raised.value.body["code"] == "model_request_rejected"
    runs = (await client.get("/v1/runs", headers=tenant.admin)).json()["data"]
    assert [r["status"] for r in runs] == ["failed"]  # one run: the SDK did not try again


async def test_a_model_provider_that_keeps_failing_is_a_bad_gateway_that_names_it(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, aclient: AsyncOpenAI
) -> None:
    await _agent(client, tenant, "support")
    for _ in range(3):  # the server's SDK tries twice more before the run fails
        openai.reply_error(503, "the provider is overloaded")
    with pytest.raises(InternalServerError) as raised:
        await aclient.chat.completions.create(model="support", messages=[{"role": "user", "content": "Hi"}])
    assert raised.value.status_code == 502
    assert isinstance(raised.value.body, dict) and raised.value.body["code"] == "model_unavailable"
    assert "the provider is overloaded" in raised.value.body["message"]


async def test_an_agent_whose_model_has_no_provider_is_a_bad_request_not_a_server_error(
    client: httpx.AsyncClient, tenant: Tenant, executing: list[Container], aclient: AsyncOpenAI
) -> None:
    await _agent(client, tenant, "support")  # its model, gpt-test, needs an OpenAI key the server is not given
    for container in executing:
        container.llm.override(providers.Object(language_model(openai_api_key=None)))
    try:
        with pytest.raises(BadRequestError) as raised:
            await aclient.chat.completions.create(model="support", messages=[{"role": "user", "content": "Hi"}])
    finally:
        for container in executing:
            container.llm.reset_override()
    assert isinstance(raised.value.body, dict) and raised.value.body["code"] == "model_not_configured"
    assert "THREADLINE_OPENAI_API_KEY" in raised.value.body["message"]


async def test_a_failed_run_is_a_failed_response(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, aclient: AsyncOpenAI
) -> None:
    await _agent(client, tenant, "support")
    openai.reply_error(400, "this model does not exist")
    response = await aclient.responses.create(model="support", input="Hi")
    assert response.status == "failed"
    assert response.error is not None and response.error.code == "model_request_rejected"  # type: ignore[comparison-overlap]


# -- errors --------------------------------------------------------------------------------------------------


async def test_an_unknown_model_is_a_404_in_openais_shape(aclient: AsyncOpenAI) -> None:
    with pytest.raises(NotFoundError) as raised:
        await aclient.chat.completions.create(model="nobody", messages=[{"role": "user", "content": "Hi"}])
    assert raised.value.status_code == 404
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["code"] == "model_not_found" and raised.value.body["type"] == "invalid_request_error"
    assert "nobody" in raised.value.body["message"]


async def test_another_organizations_agent_is_not_found(
    client: httpx.AsyncClient, make_tenant: MakeTenant, aclient: AsyncOpenAI
) -> None:
    other = await make_tenant("Other")
    await _agent(client, other, "theirs")
    with pytest.raises(NotFoundError):
        await aclient.responses.create(model="theirs", input="Hi")
    with pytest.raises(NotFoundError):
        await aclient.models.retrieve("theirs")


async def test_another_organizations_response_cannot_be_continued(
    client: httpx.AsyncClient,
    tenant: Tenant,
    make_tenant: MakeTenant,
    openai: FakeOpenAI,
    aclient: AsyncOpenAI,
    live_url: str,
) -> None:
    await _agent(client, tenant, "support")
    other = await make_tenant("Other")
    await _agent(client, other, "support")
    openai.reply_text("Theirs.")
    async with AsyncOpenAI(base_url=f"{live_url}/v1", api_key=_key(other), max_retries=0) as theirs:
        response = await theirs.responses.create(model="support", input="Secret")
    with pytest.raises(NotFoundError) as raised:
        await aclient.responses.create(model="support", input="Mine?", previous_response_id=response.id)
    assert isinstance(raised.value.body, dict) and raised.value.body["code"] == "run_not_found"


async def test_a_wrong_key_is_refused_in_openais_shape(live_url: str) -> None:
    async with AsyncOpenAI(base_url=f"{live_url}/v1", api_key="tl_wrong", max_retries=0) as sdk:
        with pytest.raises(AuthenticationError) as raised:
            await sdk.models.list()
    assert isinstance(raised.value.body, dict) and raised.value.body["type"] == "authentication_error"


async def test_a_bad_request_is_answered_in_openais_shape(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.post("/v1/chat/completions", json={"model": "x", "messages": []}, headers=tenant.admin)
    assert response.status_code == 422
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}
