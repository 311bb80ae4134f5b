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
from tests.fakes.openai_server import FakeOpenAI, TextReply
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
        stored = await uow.threads.get(org_id, thread_id, for_update=True)
        assert stored is not None
        for n in range(exchanges):
            for role, content in exchange(n):
                await uow.messages.add(stored.append(role, content, message_id=MessageId(ids.new()), now=now))
        await uow.threads.save(stored)
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
        k: said[k]
        for k in ("messages_dropped", "tool_results_cut", "estimated_tokens", "budget_tokens", "messages_summarized")
    }
    assert said["messages_summarized"] == 0  # the agent does not summarize


class Summarizer:
    """The model's replies: numbered summaries to summarizing requests, an answer to the others."""

    def __init__(self) -> None:
        self.summaries = 0

    def __call__(self, body: dict[str, Any]) -> TextReply:
        if body["messages"][0]["content"].startswith("You summarize the beginning of a conversation"):
            self.summaries += 1
            return TextReply(f"SUMMARY-{self.summaries}: chapters are about their own numbers.")
        return TextReply("Chapter 7 is the last one.")


def summarizing(requests: list[dict[str, Any]]) -> list[str]:
    """The transcripts the summarizing requests sent."""
    return [
        r["messages"][1]["content"]
        for r in requests
        if r["messages"][0]["content"].startswith("You summarize the beginning of a conversation")
    ]


async def trimmed(client: httpx.AsyncClient, tenant: Tenant, run: dict[str, Any]) -> dict[str, Any]:
    replay = await client.get(f"/v1/runs/{run['id']}/events", headers=tenant.admin)
    [said] = [data["data"] for name, data in sse(replay.text) if name == "run.context_trimmed"]
    return dict(said)


async def test_the_messages_left_out_are_summarized_and_the_next_run_extends_the_summary(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, container: Container
) -> None:
    settings = {"context_tokens": CONTEXT_TOKENS, "summarize_history": True}
    _agent, thread = await agent_and_thread(
        client, tenant, instructions="Answer from the chapters.", model_settings=settings
    )
    await fill(container, tenant, thread, exchanges=8)
    openai.responder = Summarizer()

    first = await settle(client, tenant, (await start(client, tenant, thread, input="Which chapter is last?"))["id"])

    assert first["status"] == "completed" and len(openai.requests) == 2
    [transcript] = summarizing(openai.requests)
    assert transcript.startswith("user: Question 0: what does chapter 0 say?\nassistant: [calls lookup with")
    assert "tools" not in openai.requests[0]
    sent = openai.requests[1]["messages"]
    assert "summarize_history" not in openai.requests[1]  # Threadline's own setting, not the model's
    assert len(json.dumps({"messages": sent, "tools": []})) / 4 <= CONTEXT_TOKENS - ANSWER_TOKENS
    said = await trimmed(client, tenant, first)
    dropped = said["messages_dropped"]
    assert said["messages_summarized"] == dropped == len(transcript.splitlines())
    assert sent[0] == {"role": "system", "content": "Answer from the chapters."}
    assert sent[1] == {
        "role": "user",
        "content": f"[Summary of the first {dropped} messages of this conversation, which are left out]\n"
        "SUMMARY-1: chapters are about their own numbers.",
    }
    called = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    assert called and called == [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert first["steps"][0]["context"]["messages_summarized"] == dropped
    assert first["steps"][0]["usage"]["input_tokens"] > sum(  # the summary's call is counted with the step's
        len(m["content"].split()) for m in sent if isinstance(m.get("content"), str)
    )

    # A long question leaves out more: the next run sends only those to be summarized after the summary.
    openai.requests.clear()
    question = "And which chapter comes first? " + "Please be precise. " * 450
    second = await settle(client, tenant, (await start(client, tenant, thread, input=question))["id"])

    assert second["status"] == "completed"
    [extension] = summarizing(openai.requests)
    assert extension.startswith("Summary of what came before:\nSUMMARY-1: chapters are about their own numbers.\n")
    assert "Question 0:" not in extension
    said = await trimmed(client, tenant, second)
    assert said["messages_summarized"] == said["messages_dropped"] > dropped
    assert openai.requests[-1]["messages"][1]["content"].endswith("SUMMARY-2: chapters are about their own numbers.")


async def test_a_long_thread_is_summarized_a_few_calls_per_step_oldest_first(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, container: Container
) -> None:
    settings = {"context_tokens": CONTEXT_TOKENS, "summarize_history": True}
    _agent, thread = await agent_and_thread(client, tenant, model_settings=settings)
    await fill(container, tenant, thread, exchanges=125)
    openai.responder = Summarizer()

    run = await settle(client, tenant, (await start(client, tenant, thread, input="Which chapter is last?"))["id"])

    assert run["status"] == "completed"
    transcripts = summarizing(openai.requests)
    assert len(transcripts) == 3 and len(openai.requests) == 4
    assert transcripts[0].startswith("user: Question 0: what does chapter 0 say?")
    assert transcripts[1].startswith("Summary of what came before:\nSUMMARY-1: ")
    assert transcripts[2].startswith("Summary of what came before:\nSUMMARY-2: ")
    said = await trimmed(client, tenant, run)
    summarized, skipped = said["messages_summarized"], said["messages_dropped"] - said["messages_summarized"]
    assert summarized > 0 and skipped > 0
    summary = openai.requests[-1]["messages"][0]
    assert summary["content"].startswith(
        f"[Summary of the first {summarized} messages of this conversation, which are left out; "
        f"the {skipped} messages after them are left out too]\nSUMMARY-3:"
    )


async def test_a_summary_that_cannot_be_made_leaves_the_messages_out_only(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, container: Container
) -> None:
    settings = {"context_tokens": CONTEXT_TOKENS, "summarize_history": True}
    _agent, thread = await agent_and_thread(client, tenant, model_settings=settings)
    await fill(container, tenant, thread, exchanges=40)
    openai.reply_error(400, "this model does not summarize")
    openai.reply_text("Chapter 39 is the last one.")

    run = await settle(client, tenant, (await start(client, tenant, thread, input="Which chapter is last?"))["id"])

    assert run["status"] == "completed"
    sent = openai.requests[1]["messages"]
    assert not any(m["role"] == "user" and m["content"].startswith("[Summary") for m in sent)
    context = run["steps"][0]["context"]
    assert context["messages_dropped"] > 0 and context["messages_summarized"] == 0


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


async def test_summarize_history_is_a_true_or_false_setting_of_the_agent(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    made = await client.post(
        "/v1/agents", json={"name": "Keeper", "model_settings": {"summarize_history": True}}, headers=tenant.admin
    )
    assert made.status_code == 201 and made.json()["model_settings"] == {"summarize_history": True}
    wrong = await client.post(
        "/v1/agents", json={"name": "Keeper", "model_settings": {"summarize_history": "yes"}}, headers=tenant.admin
    )
    assert wrong.status_code == 422 and "summarize_history" in wrong.text


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
