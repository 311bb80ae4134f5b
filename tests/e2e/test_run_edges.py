"""Runs at the edges: concurrent idempotent requests, name clashes, a thread's run and its messages,
the calls a run waits for, deleting a thread under a run."""

import asyncio
import logging
from typing import Any

import httpx
import pytest

from tests.conftest import Tenant
from tests.e2e.runs import agent_and_thread, messages, settle, sse_events, start
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall

pytestmark = pytest.mark.executors

LOCATE = {"name": "get_location", "description": "Where the user is", "parameters": {"type": "object"}}


def refused(response: httpx.Response, status: int, error: str) -> str:
    assert response.status_code == status, response.text
    assert response.json()["error"] == error, response.json()
    return str(response.json()["detail"])


async def waiting_run(client: httpx.AsyncClient, tenant: Tenant) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run of the offline model that waits for the client's get_location."""
    _, thread = await agent_and_thread(client, tenant, model="threadline-offline")
    run = await start(client, tenant, thread, input="call get_location {}", tools=[LOCATE])
    waiting = await settle(client, tenant, run["id"])
    assert waiting["status"] == "requires_action", waiting
    return thread, waiting


# -- 13: idempotency keys -------------------------------------------------------------------------------


async def test_concurrent_requests_with_one_idempotency_key_all_get_its_run(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    _, thread = await agent_and_thread(client, tenant, model="threadline-offline")
    url = f"/v1/threads/{thread['id']}/runs"
    body = {"input": "once", "idempotency_key": "order-7"}
    responses = await asyncio.gather(*(client.post(url, json=body, headers=tenant.admin) for _ in range(10)))
    assert sorted(r.status_code for r in responses) == [200] * 9 + [201], [r.text for r in responses]
    assert len({r.json()["id"] for r in responses}) == 1
    await settle(client, tenant, responses[0].json()["id"])
    assert [m["role"] for m in await messages(client, tenant, thread)] == ["user", "assistant"]


@pytest.mark.parametrize("with_input", [True, False], ids=["with input", "on the thread's messages"])
async def test_concurrent_requests_for_runs_of_one_thread_take_it_in_turn(
    client: httpx.AsyncClient, tenant: Tenant, with_input: bool
) -> None:
    """Without a key: a request is refused as ThreadBusy while another's run has not ended (even one created at
    the same moment), and leaves nothing in the thread; the runs created do not overlap."""
    _, thread = await agent_and_thread(client, tenant, model="threadline-offline")
    url = f"/v1/threads/{thread['id']}/runs"
    asked = [] if with_input else ["user"]
    if not with_input:
        posted = await client.post(f"/v1/threads/{thread['id']}/messages", json={"content": "hi"}, headers=tenant.admin)
        assert posted.status_code == 201, posted.text
    bodies = [{"input": f"turn {i}"} if with_input else {} for i in range(10)]
    responses = await asyncio.gather(*(client.post(url, json=body, headers=tenant.admin) for body in bodies))
    created = [r.json()["id"] for r in responses if r.status_code == 201]
    assert created, [r.text for r in responses]
    for response in responses:
        if response.status_code != 201:
            refused(response, 409, "ThreadBusy")
    for run_id in created:
        assert (await settle(client, tenant, run_id))["status"] == "completed"
    listed = (await client.get(f"{url}?limit=100", headers=tenant.admin)).json()["data"]
    assert sorted(r["id"] for r in listed) == sorted(created)
    turn = ["user", "assistant"] if with_input else ["assistant"]
    assert [m["role"] for m in await messages(client, tenant, thread)] == asked + turn * len(created)


async def test_an_idempotency_key_sent_with_another_request_is_refused(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    agent, thread = await agent_and_thread(client, tenant, model="threadline-offline")
    other = (await client.post("/v1/threads", json={"agent_id": agent["id"]}, headers=tenant.admin)).json()
    body = {"input": "once", "idempotency_key": "order-8"}
    first = await start(client, tenant, thread, **body)
    await settle(client, tenant, first["id"])
    for thread_id, changed in ((other["id"], body), (thread["id"], body | {"input": "twice"})):
        response = await client.post(f"/v1/threads/{thread_id}/runs", json=changed, headers=tenant.admin)
        assert "order-8" in refused(response, 409, "IdempotencyKeyReused")
    assert (await client.get(f"/v1/threads/{other['id']}/runs", headers=tenant.admin)).json()["data"] == []
    again = await client.post(f"/v1/threads/{thread['id']}/runs", json=body, headers=tenant.admin)
    assert again.status_code == 200 and again.json()["id"] == first["id"]


# -- 14: client tools named like the agent's ----------------------------------------------------------


async def test_a_client_tool_named_like_one_of_the_agents_tools_is_refused(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    helper, _ = await agent_and_thread(client, tenant, model="threadline-offline", slug="helper")
    _, thread = await agent_and_thread(
        client,
        tenant,
        model="threadline-offline",
        tools=[{"type": "source_query"}],
        sub_agent_ids=[helper["id"]],
    )
    url = f"/v1/threads/{thread['id']}/runs"
    for name in ("source_query", "agent__helper"):
        body = {"input": "hi", "tools": [{"name": name}]}
        detail = refused(await client.post(url, json=body, headers=tenant.admin), 422, "InvalidValue")
        assert name in detail
    assert (await client.get(url, headers=tenant.admin)).json()["data"] == []
    assert await messages(client, tenant, thread) == []


# -- 15: messages while a run is active -------------------------------------------------------------------


async def test_no_message_is_appended_while_a_run_of_the_thread_waits(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    thread, waiting = await waiting_run(client, tenant)
    url = f"/v1/threads/{thread['id']}/messages"
    before = await messages(client, tenant, thread)
    detail = refused(await client.post(url, json={"content": "hello?"}, headers=tenant.admin), 409, "ThreadBusy")
    assert waiting["id"] in detail
    assert await messages(client, tenant, thread) == before


async def test_no_message_is_appended_while_a_run_of_the_thread_executes(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    _, thread = await agent_and_thread(client, tenant)
    held = openai.hold()
    run = await start(client, tenant, thread, input="Think hard")
    await asyncio.wait_for(held.received.wait(), 10)
    url = f"/v1/threads/{thread['id']}/messages"
    refused(await client.post(url, json={"content": "hello?"}, headers=tenant.admin), 409, "ThreadBusy")
    held.release()
    assert (await settle(client, tenant, run["id"]))["status"] == "completed"
    assert (await client.post(url, json={"content": "thanks"}, headers=tenant.admin)).status_code == 201


# -- 16: the calls a run waits for ------------------------------------------------------------------------


async def test_answered_calls_are_no_longer_pending_and_calls_have_one_name(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    _, thread = await agent_and_thread(client, tenant)
    openai.reply_tool_calls(FakeToolCall("get_location", {"precise": True}, id="call_loc"))
    openai.reply_text("You are in Lisbon.")
    run = await start(client, tenant, thread, input="Where am I?", tools=[LOCATE])
    waiting = await settle(client, tenant, run["id"])
    expected = {"tool_call_id": "call_loc", "name": "get_location", "type": "client", "arguments": {"precise": True}}
    assert waiting["required_action"]["tool_calls"] == [expected]
    events = sse_events((await client.get(f"/v1/runs/{run['id']}/events", headers=tenant.admin)).text)
    assert events[-1]["data"]["required_action"] == [expected]
    assert [(c["tool_call_id"], c["pending"]) for c in waiting["steps"][0]["tool_calls"]] == [("call_loc", True)]

    answer = {"tool_results": [{"tool_use_id": "call_loc", "result": "no idea", "is_error": True}]}
    resumed = await client.post(f"/v1/runs/{run['id']}/tool-results", json=answer, headers=tenant.admin)
    assert resumed.status_code == 200, resumed.text
    for shown in (resumed.json(), await settle(client, tenant, run["id"])):
        call = shown["steps"][0]["tool_calls"][0]
        assert (call["tool_call_id"], call["pending"], call["is_error"]) == ("call_loc", False, True)
        assert shown["required_action"] is None


# -- 17: deleting a thread under a run -------------------------------------------------------------------


async def test_a_thread_with_a_waiting_run_is_not_deleted(client: httpx.AsyncClient, tenant: Tenant) -> None:
    thread, waiting = await waiting_run(client, tenant)
    response = await client.delete(f"/v1/threads/{thread['id']}", headers=tenant.admin)
    assert waiting["id"] in refused(response, 409, "ThreadBusy")
    assert (await client.get(f"/v1/threads/{thread['id']}", headers=tenant.admin)).status_code == 200
    cancelled = await client.post(f"/v1/runs/{waiting['id']}/cancel", headers=tenant.admin)
    assert cancelled.json()["status"] == "cancelled"
    assert (await client.delete(f"/v1/threads/{thread['id']}", headers=tenant.admin)).status_code == 204


async def test_deleting_a_thread_during_a_run_is_refused_and_logs_nothing_alarming(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    _, thread = await agent_and_thread(client, tenant)
    held = openai.hold()
    with caplog.at_level(logging.WARNING):
        run = await start(client, tenant, thread, input="Think hard")
        await asyncio.wait_for(held.received.wait(), 10)
        response = await client.delete(f"/v1/threads/{thread['id']}", headers=tenant.admin)
        assert run["id"] in refused(response, 409, "ThreadBusy")
        held.release()
        done = await settle(client, tenant, run["id"])
    assert done["status"] == "completed"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert (await client.delete(f"/v1/threads/{thread['id']}", headers=tenant.admin)).status_code == 204
