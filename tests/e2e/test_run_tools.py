"""Runs with the other kinds of tools: sub-agents, sources, displayable tools, server-everything."""

import asyncio
import time
from typing import Any
from uuid import UUID

import httpx
import pytest
from dependency_injector import providers
from sqlalchemy import update

from application.runs.recover_runs import RecoverRuns
from application.runs.tools.calls import PROGRESS_BURST, PROGRESS_PER_SECOND
from domain.ids import OrgId, RunId
from domain.runs import RunStatus
from infrastructure.container import Container
from infrastructure.persistence.tables import runs as runs_table
from tests.conftest import Tenant, as_port
from tests.e2e.runs import agent_and_thread, messages, settle, sse_events, start
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall
from tests.mcp_servers import everything

pytestmark = pytest.mark.executors


async def test_an_agent_delegates_to_a_sub_agent_in_a_run_of_its_own(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    researcher = (
        await client.post("/v1/agents", json={"name": "Researcher", "model": "gpt-test"}, headers=tenant.admin)
    ).json()
    _, thread = await agent_and_thread(client, tenant, name="Lead", sub_agent_ids=[researcher["id"]])
    openai.reply_tool_calls(FakeToolCall("agent__researcher", {"input": "Find the capital of Peru"}))
    openai.reply_text("Lima.")  # the researcher's answer
    openai.reply_text("The researcher says: Lima.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="Capital of Peru?"))["id"])
    assert run["status"] == "completed"
    results = (await messages(client, tenant, thread))[2]["content"]
    assert results[0]["result"] == "Lima."
    child_runs = (await client.get("/v1/runs", params={"agent_id": researcher["id"]}, headers=tenant.admin)).json()[
        "data"
    ]
    assert [(c["status"], c["parent_run_id"]) for c in child_runs] == [("completed", run["id"])]
    assert openai.requests[1]["messages"][-1] == {"role": "user", "content": "Find the capital of Peru"}


async def test_source_query_searches_what_the_thread_imported(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, mcp_server: FakeMcpServer
) -> None:
    integration = (
        await client.post("/v1/mcp-integrations", json={"name": "Memo", "url": mcp_server.url}, headers=tenant.admin)
    ).json()
    _, thread = await agent_and_thread(
        client, tenant, tools=[{"type": "source_query"}], mcp_integration_ids=[integration["id"]]
    )
    openai.reply_tool_calls(
        FakeToolCall("retrieve_mcp_resource", {"integrationId": integration["id"], "uri": "memo://people.csv"})
    )
    openai.reply_tool_calls(
        FakeToolCall("source_query", {"query": "Grace"}), FakeToolCall("source_query", {"query": "zebra"})
    )
    openai.reply_text("Grace lives in Arlington.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="Where does Grace live?"))["id"])
    assert run["status"] == "completed"
    found, missing = (await messages(client, tenant, thread))[4]["content"]
    assert found["result"].startswith("[1] People — row 1 (source_id ")
    assert "name: Grace; city: Arlington" in found["result"]
    assert missing["result"] == "No passage of this thread's sources matches 'zebra'."


async def _steps_streamed(
    client: httpx.AsyncClient,
    tenant: Tenant,
    openai: FakeOpenAI,
    mcp_server: FakeMcpServer,
    arguments: dict[str, int],
    call_id: str,
) -> list[dict[str, Any]]:
    """The events of a run, streamed, whose model calls the fake MCP server's `steps` tool once."""
    integration = (
        await client.post("/v1/mcp-integrations", json={"name": "Memo", "url": mcp_server.url}, headers=tenant.admin)
    ).json()
    _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[integration["id"]])
    openai.reply_tool_calls(FakeToolCall("memo__steps", arguments, id=call_id))
    openai.reply_text("Done.")
    streamed = await client.post(
        f"/v1/threads/{thread['id']}/runs", json={"input": "Go", "stream": True}, headers=tenant.admin
    )
    return sse_events(streamed.text)


async def test_an_mcp_tools_progress_and_log_messages_reach_the_runs_followers(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, mcp_server: FakeMcpServer
) -> None:
    events = await _steps_streamed(client, tenant, openai, mcp_server, {}, "call_steps")

    assert events[-1]["type"] == "run.completed"
    progress = [e["data"] for e in events if e["type"] == "tool_call.progress"]
    assert progress == [
        {"tool_call_id": "call_steps", "progress": step, "total": 3, "message": f"step {step} of 3"}
        for step in (1, 2, 3)
    ]
    kinds = [e["type"] for e in events]
    assert kinds.index("tool_call.started") < kinds.index("tool_call.progress")
    assert kinds.index("tool_call.progress") < kinds.index("tool_call.completed")
    logs = [e["data"] for e in events if e["type"] == "tool_call.log"]
    assert logs == [
        {"tool_call_id": "call_steps", "level": "info", "logger": "steps", "data": f"working on step {step}"}
        for step in (1, 2, 3)
    ]
    assert kinds.index("tool_call.log") < kinds.index("tool_call.completed")


async def test_a_flood_of_progress_reports_reaches_followers_as_a_few_ending_with_the_last(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, mcp_server: FakeMcpServer
) -> None:
    began = time.monotonic()
    events = await _steps_streamed(client, tenant, openai, mcp_server, {"count": 2000}, "call_flood")
    seconds = time.monotonic() - began

    assert events[-1]["type"] == "run.completed"
    progress = [e["data"]["progress"] for e in events if e["type"] == "tool_call.progress"]
    told_at_most = PROGRESS_BURST + PROGRESS_PER_SECOND * seconds + 1  # the burst, the rate, the last one
    assert PROGRESS_BURST <= len(progress) <= told_at_most, "the first reports come at once, then a few per second"
    assert progress == sorted(progress) and progress[:20] == list(range(1, 21))
    assert progress[-1] == 2000, "how far the call got is told"
    completed = next(e for e in events if e["type"] == "tool_call.completed")
    assert completed["data"]["result"] == "all 2000 steps done"


async def test_a_displayable_tool_waits_for_the_client(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    _, thread = await agent_and_thread(client, tenant, tools=[{"type": "send_email"}])
    openai.reply_tool_calls(
        FakeToolCall("send_email", {"to": ["ada@example.org"], "subject": "Hi", "body": "Hello"}, id="call_mail")
    )
    run = await settle(client, tenant, (await start(client, tenant, thread, input="Email Ada"))["id"])
    assert run["status"] == "requires_action"
    assert run["required_action"]["tool_calls"][0]["type"] == "send_email"
    assert run["required_action"]["tool_calls"][0]["arguments"]["to"] == ["ada@example.org"]


async def test_the_web_reader_keeps_to_the_outbound_guard(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    _, thread = await agent_and_thread(client, tenant, tools=[{"type": "website_content"}])
    openai.reply_tool_calls(FakeToolCall("website_content", {"url": "http://169.254.169.254/latest/meta-data"}))
    openai.reply_text("I could not read it.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="read it"))["id"])
    assert run["status"] == "completed"
    result = (await messages(client, tenant, thread))[2]["content"][0]["result"]
    assert result.startswith("Fetching the page failed:") and "169.254.169.254" in result


async def test_the_offline_model_calls_a_tool_when_asked_to(
    client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer
) -> None:
    integration = (
        await client.post("/v1/mcp-integrations", json={"name": "Memo", "url": mcp_server.url}, headers=tenant.admin)
    ).json()
    _, thread = await agent_and_thread(
        client, tenant, model="threadline-offline", mcp_integration_ids=[integration["id"]]
    )
    run = await settle(
        client, tenant, (await start(client, tenant, thread, input='call memo__echo {"message": "hi"}'))["id"]
    )
    assert run["status"] == "completed" and len(run["steps"]) == 2
    history = await messages(client, tenant, thread)
    assert history[2]["content"][0]["result"] == "Echo: hi"
    assert "Echo: hi" in history[3]["content"][0]["text"]


async def test_a_run_uses_server_everything_over_stdio(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    everything.require_everything()
    integration = (
        await client.post(
            "/v1/mcp-integrations",
            json={"name": "Everything", "transport": "stdio", "server": "everything"},
            headers=tenant.admin,
        )
    ).json()
    _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[integration["id"]])
    openai.reply_tool_calls(
        FakeToolCall("everything__get-sum", {"a": 20, "b": 22}),
        FakeToolCall(
            "retrieve_mcp_prompt",
            {"integrationId": integration["id"], "promptName": "args-prompt", "arguments": {"city": "Paris"}},
        ),
    )
    openai.reply_text("42, and Paris.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="go"))["id"])
    assert run["status"] == "completed", run
    total, prompt = (await messages(client, tenant, thread))[2]["content"]
    assert total["result"] == "The sum of 20 and 22 is 42."
    assert prompt["result"].startswith("Prompt: args-prompt\n")
    assert "1. User: What's weather in Paris" in prompt["result"]


@pytest.mark.executors("in_process")  # stops the executor of this process
async def test_runs_in_flight_at_shutdown_are_marked_interrupted(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, container: Container
) -> None:
    _, thread = await agent_and_thread(client, tenant)
    held = openai.hold()
    run = await start(client, tenant, thread, input="long thought")
    await asyncio.wait_for(held.received.wait(), 10)
    interrupted = await container.run_executor().shutdown(grace_seconds=0)
    stopped = container.run_executor.shutdown()  # later tests get a fresh executor
    assert stopped is not None  # an async resource: stopping and starting it again are awaited
    await stopped
    started = container.run_executor.init()
    assert started is not None
    await started
    assert [str(r) for r in interrupted] == [run["id"]]
    stored = (await client.get(f"/v1/runs/{run['id']}", headers=tenant.admin)).json()
    assert stored["status"] == "failed" and stored["error"]["code"] == "interrupted"


class RecordingExecutor:
    def __init__(self) -> None:
        self.submitted: list[str] = []

    async def submit(self, org_id: object, run_id: object) -> None:
        self.submitted.append(str(run_id))

    async def reserve(self, org_id: object) -> None:
        return None

    async def cancel(self, run_id: object) -> bool:
        return False


@pytest.mark.executors("in_process")  # the start-up recovery of an in-process API
async def test_at_start_queued_runs_resume_and_abandoned_ones_fail(
    client: httpx.AsyncClient, tenant: Tenant, container: Container
) -> None:
    _, thread = await agent_and_thread(client, tenant, model="threadline-offline")
    other_thread = (
        await client.post("/v1/threads", json={"agent_id": thread["agent_id"]}, headers=tenant.admin)
    ).json()
    executor = RecordingExecutor()
    container.run_executor.override(providers.Object(executor))
    try:
        queued = await start(client, tenant, thread, input="one")
        abandoned = await start(client, tenant, other_thread, input="two")
    finally:
        container.run_executor.reset_override()
    async with as_port(container.uow()) as uow:  # a process that stopped mid-run left this one in progress
        stored = await uow.runs.get(OrgId(UUID(tenant.id)), RunId(UUID(abandoned["id"])), for_update=True)
        assert stored is not None
        stored.start(stored.created_at)
        await uow.runs.save(stored)
        await uow.commit()
    async with container.database().engine.begin() as connection:  # ... and no longer holds its runs
        ids = [UUID(queued["id"]), UUID(abandoned["id"])]
        await connection.execute(update(runs_table).where(runs_table.c.id.in_(ids)).values(holder=None))
    recorder = RecordingExecutor()
    recover = RecoverRuns(as_port(container.uow()), container.clock(), container.run_event_bus(), recorder)
    interrupted, resubmitted = await recover.execute()
    assert (interrupted, resubmitted) >= (1, 1)
    assert queued["id"] in recorder.submitted
    after = (await client.get(f"/v1/runs/{abandoned['id']}", headers=tenant.admin)).json()
    assert after["status"] == RunStatus.FAILED.value and after["error"]["code"] == "interrupted"
