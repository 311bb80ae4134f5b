"""A run's trace as Langfuse receives it: the real SDK exporting to a local OTLP receiver."""

import httpx

from infrastructure.tracing import LangfuseTracer
from tests.conftest import Tenant
from tests.e2e.runs import agent_and_thread, settle, start
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall
from tests.fakes.otlp_receiver import OtlpReceiver


async def test_a_run_is_one_trace_with_a_generation_per_model_call_and_a_span_per_tool_call(
    client: httpx.AsyncClient,
    tenant: Tenant,
    openai: FakeOpenAI,
    mcp_server: FakeMcpServer,
    traced: tuple[LangfuseTracer, OtlpReceiver],
) -> None:
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

    assert run["trace_id"] == root.trace_id
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert root.attributes["session.id"] == thread["id"]
    assert root.json_attribute("langfuse.trace.metadata.org_id") == tenant.id
    assert root.json_attribute("langfuse.trace.metadata.agent_id") == agent["id"]
    assert root.json_attribute("langfuse.trace.metadata.run_id") == run["id"]
    children = [s for s in spans if s.parent_span_id == root.span_id]
    assert sorted(s.name for s in children) == sorted(
        ["step 1", "step 2", "mcp_tool_call", "mcp_prompt_retrieval", "mcp_prompt_retrieval"]
    )

    generations = {s.name: s for s in children if s.attributes.get("langfuse.observation.type") == "generation"}
    assert set(generations) == {"step 1", "step 2"}
    assert generations["step 1"].attributes["langfuse.observation.model.name"] == "gpt-test"
    usage = generations["step 2"].json_attribute("langfuse.observation.usage_details")
    assert usage["input"] > 0 and usage["total"] == usage["input"] + usage["output"]

    tool_call = next(s for s in children if s.name == "mcp_tool_call")
    assert tool_call.json_attribute("langfuse.observation.metadata.toolName") == "echo"
    retrievals = [s for s in children if s.name == "mcp_prompt_retrieval"]
    ok = next(s for s in retrievals if s.json_attribute("langfuse.observation.metadata.promptName") == "greet")
    failed = next(s for s in retrievals if s.json_attribute("langfuse.observation.metadata.promptName") == "missing")
    assert ok.json_attribute("langfuse.observation.metadata.integrationId") == integration["id"]
    assert ok.json_attribute("langfuse.observation.metadata.operationType") == "prompt_retrieval"
    assert "langfuse.observation.level" not in ok.attributes
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
