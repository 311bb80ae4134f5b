"""Each request has an id: the caller's X-Request-Id when it is a sane one, else a new one. It comes back in the
header, is on the request's log lines and on the run it creates (and that run's log lines)."""

import asyncio
import json
import os
import re
from pathlib import Path

import httpx

from tests.conftest import Tenant
from tests.databases import fresh_database, off_the_loop
from tests.e2e.runs import agent_and_thread, settle
from tests.e2e.test_mcp_server import mcp_client, publish_agent
from tests.fakes.openai_server import FakeOpenAI, echo_text
from tests.servers import THREADLINE, free_port, organization_headers, threadline


async def test_a_request_without_an_id_gets_one_in_the_header(client: httpx.AsyncClient) -> None:
    first, second = await client.get("/healthz"), await client.get("/healthz")
    assert re.fullmatch(r"[0-9a-f]{32}", first.headers["x-request-id"])
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


async def test_the_callers_id_is_kept_and_an_insane_one_replaced(client: httpx.AsyncClient) -> None:
    kept = await client.get("/v1/me", headers={"X-Request-Id": "checkout-7f3a:42"})
    assert kept.status_code == 401 and kept.headers["x-request-id"] == "checkout-7f3a:42"  # errors carry it too
    for insane in ("x" * 200, "two words", "<script>"):
        replaced = await client.get("/healthz", headers={"X-Request-Id": insane})
        assert re.fullmatch(r"[0-9a-f]{32}", replaced.headers["x-request-id"])


async def test_the_run_a_request_creates_carries_its_id(client: httpx.AsyncClient, tenant: Tenant) -> None:
    _agent, thread = await agent_and_thread(client, tenant, model="threadline-offline")
    created = await client.post(
        f"/v1/threads/{thread['id']}/runs", json={"input": "hi"}, headers=tenant.admin | {"X-Request-Id": "req-run-1"}
    )
    assert created.status_code == 201
    assert created.json()["request_id"] == "req-run-1"
    assert (await settle(client, tenant, created.json()["id"]))["request_id"] == "req-run-1"
    listed = await client.get(f"/v1/threads/{thread['id']}/runs", headers=tenant.admin)
    assert [run["request_id"] for run in listed.json()["data"]] == ["req-run-1"]


async def test_the_log_lines_of_a_request_and_of_its_run_carry_its_id(tmp_path: Path) -> None:
    async with off_the_loop(fresh_database(tmp_path)) as url, FakeOpenAI(responder=echo_text) as model:
        env = os.environ | {
            "THREADLINE_DATABASE_URL": url,
            "THREADLINE_LOG_FORMAT": "json",
            "THREADLINE_LOG_LEVEL": "DEBUG",  # the run's model call is logged by its HTTP client at DEBUG
            "THREADLINE_OPENAI_API_KEY": "sk-test",
            "THREADLINE_OPENAI_BASE_URL": model.base_url,
            "THREADLINE_DATA_DIR": str(tmp_path / "data"),
        }
        await threadline(env, "migrate")
        headers = await organization_headers(env, "Logged")
        port = free_port()
        server = await asyncio.create_subprocess_exec(
            THREADLINE, "serve", "--no-migrate", "--port", str(port), env=env, stderr=asyncio.subprocess.PIPE
        )
        assert server.stderr is not None
        while b"Uvicorn running on" not in await server.stderr.readline():
            pass
        drain = asyncio.create_task(server.stderr.read())
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as http:
            agent = await http.post("/v1/agents", json={"name": "Logged", "model": "gpt-test"})
            thread = await http.post("/v1/threads", json={"agent_id": agent.json()["id"]})
            run = await http.post(
                f"/v1/threads/{thread.json()['id']}/runs",
                json={"input": "hello", "stream": True},
                headers={"X-Request-Id": "req-logged-1"},
            )
            assert run.status_code == 201
        server.terminate()
        await asyncio.wait_for(server.wait(), 20)
        lines = [json.loads(line) for line in (await drain).decode().splitlines() if line.startswith("{")]
    tagged = [line for line in lines if line.get("request_id") == "req-logged-1"]
    messages = " | ".join(line["message"] for line in tagged)
    assert any("POST /v1/threads/" in line["message"] for line in tagged), messages  # the access log line
    assert any("chat/completions" in line["message"] for line in tagged), messages  # the run's model call
    others = [line for line in lines if "POST /v1/agents" in line["message"]]
    assert others and all(line.get("request_id") not in (None, "req-logged-1") for line in others)


async def test_the_run_an_mcp_tool_call_creates_carries_the_requests_id(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant
) -> None:
    await publish_agent(client, tenant)
    caller = Tenant(id=tenant.id, slug=tenant.slug, admin=tenant.admin | {"X-Request-Id": "mcp-call-7"})
    async with mcp_client(live_url, caller) as session:
        result = await session.call_tool("echo-bot", {"input": "Say hi"})
    assert result.is_error is False and result.meta is not None
    run = (await client.get(f"/v1/runs/{result.meta['threadline/run_id']}", headers=tenant.admin)).json()
    assert run["request_id"] == "mcp-call-7"
