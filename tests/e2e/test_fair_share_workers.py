"""Fair share in worker mode as deployed: one `threadline serve` and two `threadline worker` processes on one
PostgreSQL database. An organization's limit holds for the deployment, not per worker."""

import asyncio
import os
from collections import Counter
from pathlib import Path

import httpx
import pytest

from infrastructure.execution.job_queue import ADMISSION_RETRY_SECONDS
from tests.databases import POSTGRES_URL, backend, off_the_loop, postgres_database
from tests.fakes.openai_server import FakeOpenAI, TextReply
from tests.servers import THREADLINE, free_port, organization_headers, threadline

pytestmark = pytest.mark.skipif(
    backend() != "postgresql", reason="worker mode needs PostgreSQL (set THREADLINE_TEST_POSTGRES_URL)"
)


async def _start(
    env: dict[str, str], *args: str, ready: str, drains: list[asyncio.Task[bytes]]
) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(THREADLINE, *args, env=env, stderr=asyncio.subprocess.PIPE)
    assert process.stderr is not None
    while ready.encode() not in (line := await asyncio.wait_for(process.stderr.readline(), 60)):
        assert line, f"threadline {args[0]} exited before it was ready"
    drains.append(asyncio.create_task(process.stderr.read()))  # the log must never fill its pipe
    return process


async def _thread(http: httpx.AsyncClient, headers: dict[str, str]) -> str:
    agent = await http.post("/v1/agents", json={"name": "Worker agent", "model": "gpt-test"}, headers=headers)
    thread = await http.post("/v1/threads", json={"agent_id": agent.json()["id"]}, headers=headers)
    return str(thread.json()["id"])


async def test_two_workers_keep_an_organization_to_its_limit_while_another_starts_at_once(tmp_path: Path) -> None:
    assert POSTGRES_URL is not None
    gate, arrived, in_flight, most = asyncio.Event(), asyncio.Event(), Counter[str](), Counter[str]()
    two_of_a = asyncio.Event()  # org A's limit is reached at the model

    async def model_answer(body: dict[str, object]) -> TextReply:
        text = str([m for m in body["messages"] if m["role"] == "user"][-1]["content"])  # type: ignore[attr-defined]
        org = text[0]
        in_flight[org] += 1
        most[org] = max(most[org], in_flight[org])
        if org == "A" and in_flight[org] == 2:
            two_of_a.set()
        try:
            if org == "B":
                arrived.set()
            else:
                await gate.wait()
            return TextReply(f"done: {text}")
        finally:
            in_flight[org] -= 1

    started: list[asyncio.subprocess.Process] = []
    drains: list[asyncio.Task[bytes]] = []
    async with off_the_loop(postgres_database(POSTGRES_URL, "threadline_fair_share")) as url:
        try:
            async with FakeOpenAI(responder=model_answer, record_requests=False) as model:
                env = os.environ | {
                    "THREADLINE_DATABASE_URL": url,
                    "THREADLINE_EXECUTOR": "queue",
                    "THREADLINE_DATABASE_POOL_SIZE": "4",
                    "THREADLINE_LOG_FORMAT": "text",
                    "THREADLINE_OPENAI_API_KEY": "sk-test",
                    "THREADLINE_OPENAI_BASE_URL": model.base_url,
                    "THREADLINE_DATA_DIR": str(tmp_path / "data"),
                    "THREADLINE_SECRET_KEY": "fair share test key",
                }
                await threadline(env, "migrate")
                busy, other = await organization_headers(env, "Busy"), await organization_headers(env, "Other")
                await threadline(env, "orgs", "set-limits", "busy", "--max-concurrent-runs", "2")
                port = free_port()
                started.append(
                    await _start(
                        env, "serve", "--no-migrate", "--port", str(port), ready="Uvicorn running on", drains=drains
                    )
                )
                started += [await _start(env, "worker", ready="Starting worker", drains=drains) for _ in range(2)]
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
                    runs = []
                    for index in range(5):
                        thread = await _thread(http, busy)
                        created = await http.post(
                            f"/v1/threads/{thread}/runs", json={"input": f"A{index}"}, headers=busy
                        )
                        runs.append(created.json()["id"])
                    thread = await _thread(http, other)
                    await http.post(f"/v1/threads/{thread}/runs", json={"input": "B0"}, headers=other)
                    await asyncio.wait_for(arrived.wait(), 30)  # B's run reached the model while A's wait
                    await asyncio.wait_for(two_of_a.wait(), 30)  # both of A's slots are at the model
                    statuses = Counter(
                        [(await http.get(f"/v1/runs/{run}", headers=busy)).json()["status"] for run in runs]
                    )
                    assert statuses == {"in_progress": 2, "queued": 3}
                    gate.set()
                    # The waiting runs are woken as slots are given back, not found by the queue's later retry.
                    async with asyncio.timeout(ADMISSION_RETRY_SECONDS / 2):
                        ended = [(await http.get(f"/v1/runs/{r}/events", headers=busy)).status_code for r in runs]
                    final = [(await http.get(f"/v1/runs/{run}", headers=busy)).json()["status"] for run in runs]
                assert ended == [200] * 5 and final == ["completed"] * 5
                assert most["A"] == 2
        finally:
            for process in started:
                if process.returncode is None:
                    process.terminate()
            await asyncio.gather(*(asyncio.wait_for(p.wait(), 30) for p in started), *drains, return_exceptions=True)
