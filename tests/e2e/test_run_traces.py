"""A run's trace as Langfuse receives it: the real SDK exporting to a local OTLP receiver."""

from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from infrastructure.tracing import LangfuseTracer
from tests.conftest import Tenant
from tests.e2e.runs import agent_and_thread, settle, start
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall
from tests.fakes.otlp_receiver import OtlpReceiver, ReceivedSpan

pytestmark = pytest.mark.executors


@dataclass
class TracedRun:
    """A run whose model called an MCP tool and retrieved two prompts (one missing) in step 1, then
    answered in step 2; and the spans Langfuse received for it."""

    agent: dict[str, Any]
    thread: dict[str, Any]
    integration: dict[str, Any]
    run: dict[str, Any]
    root: ReceivedSpan
    spans: list[ReceivedSpan]

    @property
    def children(self) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.parent_span_id == self.root.span_id]

    def retrieval(self, prompt_name: str) -> ReceivedSpan:
        return next(
            s
            for s in self.children
            if s.name == "mcp_prompt_retrieval"
            and s.json_attribute("langfuse.observation.metadata.promptName") == prompt_name
        )


@pytest.fixture
async def traced_run(
    client: httpx.AsyncClient,
    tenant: Tenant,
    openai: FakeOpenAI,
    mcp_server: FakeMcpServer,
    traced: tuple[LangfuseTracer, OtlpReceiver],
) -> TracedRun:
    tracer, receiver = traced
    integration = (
        await client.post("/v1/mcp-integrations", json={"name": "Memo", "url": mcp_server.url}, headers=tenant.admin)
    ).json()
    agent, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[integration["id"]])
    openai.reply_tool_calls(
        FakeToolCall("memo__echo", {"message": "hi"}),
        FakeToolCall(
            "retrieve_mcp_prompt",
            {"integrationId": integration["id"], "promptName": "greet", "arguments": {"name": "Ada"}},
        ),
        FakeToolCall("retrieve_mcp_prompt", {"integrationId": integration["id"], "promptName": "missing"}),
    )
    openai.reply_text("Done.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="go"))["id"])
    assert run["status"] == "completed"
    await tracer.flush()
    root = await receiver.wait_for_span("run")
    spans = await receiver.wait_for_spans(6)
    return TracedRun(agent, thread, integration, run, root, spans)


async def test_a_run_is_one_trace(traced_run: TracedRun) -> None:
    assert traced_run.run["trace_id"] == traced_run.root.trace_id
    assert {s.trace_id for s in traced_run.spans} == {traced_run.root.trace_id}


async def test_the_trace_names_the_thread_organization_agent_and_run(tenant: Tenant, traced_run: TracedRun) -> None:
    root = traced_run.root
    assert root.attributes["session.id"] == traced_run.thread["id"]
    assert root.json_attribute("langfuse.trace.metadata.org_id") == tenant.id
    assert root.json_attribute("langfuse.trace.metadata.agent_id") == traced_run.agent["id"]
    assert root.json_attribute("langfuse.trace.metadata.run_id") == traced_run.run["id"]


async def test_the_trace_names_the_request_that_created_the_run(traced_run: TracedRun) -> None:
    assert traced_run.run["request_id"]
    assert traced_run.root.json_attribute("langfuse.trace.metadata.request_id") == traced_run.run["request_id"]


async def test_the_trace_has_a_generation_per_model_call_and_a_span_per_tool_call(traced_run: TracedRun) -> None:
    assert sorted(s.name for s in traced_run.children) == sorted(
        ["step 1", "step 2", "mcp_tool_call", "mcp_prompt_retrieval", "mcp_prompt_retrieval"]
    )
    generations = [s for s in traced_run.children if s.attributes.get("langfuse.observation.type") == "generation"]
    assert sorted(s.name for s in generations) == ["step 1", "step 2"]


async def test_a_generation_names_its_model_and_counts_its_tokens(traced_run: TracedRun) -> None:
    generations = {s.name: s for s in traced_run.children if s.name.startswith("step ")}
    assert generations["step 1"].attributes["langfuse.observation.model.name"] == "gpt-test"
    usage = generations["step 2"].json_attribute("langfuse.observation.usage_details")
    assert usage["input"] > 0 and usage["total"] == usage["input"] + usage["output"]


async def test_a_tool_call_span_names_the_tool(traced_run: TracedRun) -> None:
    tool_call = next(s for s in traced_run.children if s.name == "mcp_tool_call")
    assert tool_call.json_attribute("langfuse.observation.metadata.toolName") == "echo"


async def test_a_prompt_retrieval_span_names_its_integration_and_operation(traced_run: TracedRun) -> None:
    ok = traced_run.retrieval("greet")
    assert ok.json_attribute("langfuse.observation.metadata.integrationId") == traced_run.integration["id"]
    assert ok.json_attribute("langfuse.observation.metadata.operationType") == "prompt_retrieval"
    assert "langfuse.observation.level" not in ok.attributes


async def test_a_failed_prompt_retrieval_is_an_error_span_saying_why(traced_run: TracedRun) -> None:
    failed = traced_run.retrieval("missing")
    assert failed.attributes["langfuse.observation.level"] == "ERROR"
    assert "has no prompt 'missing'" in failed.attributes["langfuse.observation.status_message"]


async def test_a_collector_that_is_down_does_not_fail_runs(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, traced: tuple[LangfuseTracer, OtlpReceiver]
) -> None:
    _tracer, receiver = traced
    receiver.status = 500
    _, thread = await agent_and_thread(client, tenant)
    openai.reply_text("Fine anyway.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="hi"))["id"])
    assert run["status"] == "completed"


async def test_a_run_links_to_its_trace_in_langfuse(
    client: httpx.AsyncClient, tenant: Tenant, traced_run: TracedRun, traced: tuple[LangfuseTracer, OtlpReceiver]
) -> None:
    _tracer, receiver = traced
    trace_url = f"{receiver.base_url}/trace/{traced_run.root.trace_id}"
    assert traced_run.run["trace_url"] == trace_url
    listed = (await client.get("/v1/runs", headers=tenant.admin)).json()["data"]
    assert [run["trace_url"] for run in listed] == [trace_url]
    documented = (await client.get("/openapi.json")).json()["components"]["schemas"]["RunOut"]["properties"]
    assert "Langfuse" in documented["trace_url"]["description"]
