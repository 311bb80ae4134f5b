"""A long thread runs against a model with a small context window: the request is fitted to it, and the run
says what it left out."""

import json
from datetime import timedelta
from typing import Any
from uuid import UUID

import httpx
import pytest

from domain.ids import MessageId, OrgId, ThreadId
from domain.messages import ContentPart, MessageRole, TextContent, ToolResultContent, ToolUseContent
from infrastructure.container import Container
from infrastructure.tracing import LangfuseTracer
from tests.conftest import Tenant, as_port
from tests.e2e.runs import agent_and_thread, settle, start
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.executors

CONTEXT_TOKENS = 8_192
ANSWER_TOKENS = 2_048  # a quarter of the window, kept for the answer when the agent sets no max_tokens
RESULT_CHARS = 6_000


def exchange(n: int) -> list[tuple[MessageRole, tuple[ContentPart, ...]]]:
    """A question, the model's lookup, its long result, and the answer: four messages."""
    call_id = f"call_{n}"
    return [
        (MessageRole.USER, (TextContent(text=f"Question {n}: what does chapter {n} say?"),)),
        (MessageRole.ASSISTANT, (ToolUseContent(id=call_id, name="lookup", params={"chapter": n}),)),
        (
            MessageRole.TOOL,
            (ToolResultContent(tool_use_id=call_id, tool_name="lookup", result=f"chapter {n} " + "z" * RESULT_CHARS),),
        ),
        (MessageRole.ASSISTANT, (TextContent(text=f"Chapter {n} is about {n}."),)),
    ]


async def fill(container: Container, tenant: Tenant, thread: dict[str, Any], exchanges: int) -> None:
    """Store a long history in the thread, as earlier runs would have."""
    org_id, thread_id = OrgId(UUID(tenant.id)), ThreadId(UUID(thread["id"]))
    now, ids = container.clock().now() - timedelta(hours=1), container.ids()
    async with as_port(container.uow()) as uow:
        for n in range(exchanges):
            for role, content in exchange(n):
                stored = await uow.threads.advance(org_id, thread_id, now)
                assert stored is not None
                await uow.messages.add(stored.append(role, content, message_id=MessageId(ids.new()), now=now))
        await uow.commit()


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    name = ""
    for line in text.splitlines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[len("data: ") :])))
    return events


async def test_a_500_message_thread_fits_an_8k_model_with_its_tool_pairs_and_latest_question(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, container: Container
) -> None:
    _agent, thread = await agent_and_thread(
        client, tenant, instructions="Answer from the chapters.", model_settings={"context_tokens": CONTEXT_TOKENS}
    )
    await fill(container, tenant, thread, exchanges=125)
    openai.reply_text("Chapter 124 is the last one.")

    run = await settle(client, tenant, (await start(client, tenant, thread, input="Which chapter is last?"))["id"])

    assert run["status"] == "completed"
    request = openai.requests[0]
    sent = request["messages"]
    # Within the window less the answer's room, counting every character of the request's JSON (keys too).
    assert len(json.dumps({"messages": sent, "tools": request.get("tools", [])})) / 4 <= CONTEXT_TOKENS - ANSWER_TOKENS
    assert sent[0] == {"role": "system", "content": "Answer from the chapters."}
    assert sent[-1] == {"role": "user", "content": "Which chapter is last?"}
    assert 3 < len(sent) < 40
    called = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert called == answered  # every call with its result, every result with its call
    for position, message in enumerate(sent):
        if message["role"] == "tool":
            before = sent[position - 1]
            assert message["tool_call_id"] in [c["id"] for c in before.get("tool_calls", [])]
    assert "Question 124: what does chapter 124 say?" in [m["content"] for m in sent if m["role"] == "user"]

    replay = await client.get(f"/v1/runs/{run['id']}/events", headers=tenant.admin)
    trimmed = [data for name, data in sse(replay.text) if name == "run.context_trimmed"]
    assert len(trimmed) == 1
    said = trimmed[0]["data"]
    assert said["step"] == 1
    assert said["messages_dropped"] == 501 - (len(sent) - 1)  # 500 stored, the run's question; less those sent
    assert said["budget_tokens"] == CONTEXT_TOKENS - ANSWER_TOKENS
    assert 0 < said["estimated_tokens"] <= said["budget_tokens"]
    stored = (await client.get(f"/v1/runs/{run['id']}", headers=tenant.admin)).json()
    assert stored["steps"][0]["context"] == {"messages_sent": len(sent) - 1} | {
        k: said[k] for k in ("messages_dropped", "tool_results_cut", "estimated_tokens", "budget_tokens")
    }


async def test_a_thread_that_fits_is_sent_whole_and_nothing_is_said(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, container: Container
) -> None:
    _agent, thread = await agent_and_thread(client, tenant, model_settings={"context_tokens": CONTEXT_TOKENS})
    openai.reply_text("Fine.")

    run = await settle(client, tenant, (await start(client, tenant, thread, input="Hello"))["id"])

    assert [m["role"] for m in openai.requests[0]["messages"]] == ["user"]
    replay = await client.get(f"/v1/runs/{run['id']}/events", headers=tenant.admin)
    assert "run.context_trimmed" not in [name for name, _ in sse(replay.text)]
    context = run["steps"][0]["context"]
    assert (context["messages_sent"], context["messages_dropped"], context["tool_results_cut"]) == (1, 0, 0)


async def test_an_agents_context_window_is_validated(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.post(
        "/v1/agents", json={"name": "Tiny", "model_settings": {"context_tokens": 10}}, headers=tenant.admin
    )
    assert response.status_code == 422
    assert set(response.json()) == {"error", "detail"}


async def test_the_model_calls_trace_shows_what_its_request_left_out(
    client: httpx.AsyncClient,
    tenant: Tenant,
    openai: FakeOpenAI,
    container: Container,
    traced: tuple[LangfuseTracer, OtlpReceiver],
) -> None:
    tracer, receiver = traced
    _agent, thread = await agent_and_thread(client, tenant, model_settings={"context_tokens": CONTEXT_TOKENS})
    await fill(container, tenant, thread, exchanges=10)
    openai.reply_text("Ten chapters.")

    run = await settle(client, tenant, (await start(client, tenant, thread, input="How many chapters?"))["id"])

    await tracer.flush()
    generation = await receiver.wait_for_span("step 1")
    context = generation.json_attribute("langfuse.observation.metadata.context")
    assert context == run["steps"][0]["context"]
    assert context["messages_dropped"] > 0
