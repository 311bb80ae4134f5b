"""Worker mode as deployed: two `threadline serve` replicas that queue runs and two `threadline worker`
processes that execute them, real processes on one PostgreSQL database, the model a fake on loopback."""

import asyncio
import contextlib
import os
import re
import signal
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from mcp import types
from prometheus_client.parser import text_string_to_metric_families

from infrastructure.execution import pg_catalog_changes
from infrastructure.execution.pg_event_bus import CHANNEL
from infrastructure.execution.pg_listener import libpq_dsn
from infrastructure.persistence.run_holders import SILENCE_OF_THE_STRANDED
from infrastructure.security import key_revocations
from tests.conftest import Tenant
from tests.databases import POSTGRES_URL, backend, off_the_loop, postgres_database
from tests.e2e.runs import sse_events
from tests.e2e.test_mcp_server import create_template, mcp_client
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, HeldReply, echo_text
from tests.servers import THREADLINE, free_port, organization_headers, threadline

pytestmark = pytest.mark.skipif(
    backend() != "postgresql", reason="worker mode needs PostgreSQL (set THREADLINE_TEST_POSTGRES_URL)"
)
LOST_SECONDS = 4


@dataclass
class Process:
    name: str
    process: asyncio.subprocess.Process
    log: list[str] = field(default_factory=list)
    drain: asyncio.Task[None] | None = None
    metrics: str | None = None
    """Where a worker serves its metrics (THREADLINE_WORKER_METRICS_PORT), when it does."""

    async def wait_for_line(self, pattern: str) -> None:
        assert self.process.stderr is not None
        while line := (await self.process.stderr.readline()).decode():
            self.log.append(line)
            if re.search(pattern, line):
                self.drain = asyncio.create_task(self._drain())
                return
        pytest.fail(f"{self.name} exited before saying {pattern!r}:\n{''.join(self.log)}")

    async def _drain(self) -> None:
        assert self.process.stderr is not None
        while line := (await self.process.stderr.readline()).decode():
            self.log.append(line)

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
            await asyncio.wait_for(self.process.wait(), 30)
        if self.drain is not None:
            await self.drain


@dataclass
class Deployment:
    apis: list[str]
    workers: list[Process]
    headers: dict[str, str]
    model: FakeOpenAI
    env: dict[str, str]


async def _start(name: str, env: dict[str, str], *args: str, ready: str, metrics_port: int | None = None) -> Process:
    if metrics_port is not None:
        env = env | {"THREADLINE_WORKER_METRICS_PORT": str(metrics_port)}
    process = await asyncio.create_subprocess_exec(THREADLINE, *args, env=env, stderr=asyncio.subprocess.PIPE)
    metrics = f"http://127.0.0.1:{metrics_port}/metrics" if metrics_port is not None else None
    started = Process(name, process, metrics=metrics)
    await asyncio.wait_for(started.wait_for_line(ready), 60)
    return started


def _environment(url: str, model: FakeOpenAI, data_dir: Path, executor: str) -> dict[str, str]:
    return os.environ | {
        "THREADLINE_DATABASE_URL": url,
        "THREADLINE_EXECUTOR": executor,
        "THREADLINE_DATABASE_POOL_SIZE": "5",  # 4 processes within the server's 100 connections
        "THREADLINE_WORKER_LOST_SECONDS": str(LOST_SECONDS),
        # One organization runs everything here: its runs are not held to a share (test_fair_share_workers.py).
        "THREADLINE_ORG_MAX_CONCURRENT_RUNS": "1000",
        "THREADLINE_WORKER_GRACE_SECONDS": "1",
        "THREADLINE_LOG_FORMAT": "text",
        "THREADLINE_OPENAI_API_KEY": "sk-test",
        "THREADLINE_OPENAI_BASE_URL": model.base_url,
        "THREADLINE_DATA_DIR": str(data_dir),
        "THREADLINE_SECRET_KEY": "worker mode test key",
        "THREADLINE_MCP_ALLOWED_NETWORKS": "127.0.0.0/8",  # the MCP servers of the tests run on loopback
    }


async def _organization(env: dict[str, str], *, migrate: bool = True) -> dict[str, str]:
    """Migrates the database (unless told not to) and creates an organization: the headers of its admin key."""
    if migrate:
        await threadline(env, "migrate")
    return await organization_headers(env, "Workers")


@pytest.fixture(scope="module")
async def deployment(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Deployment]:
    assert POSTGRES_URL is not None
    async with (
        off_the_loop(postgres_database(POSTGRES_URL, "threadline_workers")) as url,
        FakeOpenAI(responder=echo_text, record_requests=False) as model,
    ):
        env = _environment(url, model, tmp_path_factory.mktemp("data"), "queue")
        await threadline(env, "migrate")
        processes: list[Process] = []
        workers: list[Process] = []
        try:
            ports = [free_port(), free_port()]
            starting = [
                *(
                    _start(f"api-{i}", env, "serve", "--no-migrate", "--port", str(port), ready="Uvicorn running on")
                    for i, port in enumerate(ports)
                ),
                *(
                    _start(f"worker-{i}", env, "worker", ready="Starting worker", metrics_port=free_port())
                    for i in range(2)
                ),
            ]
            # Side by side, and with the organization made meanwhile: each process takes seconds to start.
            organization, *results = await asyncio.gather(
                _organization(env, migrate=False), *starting, return_exceptions=True
            )
            processes += [p for p in results if isinstance(p, Process)]
            for failed in [organization, *results]:
                if isinstance(failed, BaseException):
                    raise failed
            assert isinstance(organization, dict)
            headers: dict[str, str] = organization
            workers += processes[2:]
            yield Deployment(
                apis=[f"http://127.0.0.1:{port}" for port in ports],
                workers=workers,
                headers=headers,
                model=model,
                env=env,
            )
        finally:
            started = processes + [w for w in workers if w not in processes]  # tests replace workers
            await asyncio.gather(*(p.stop() for p in started))


async def _thread(client: httpx.AsyncClient, deployment: Deployment) -> str:
    agent = await client.post(
        "/v1/agents", json={"name": f"Agent {uuid.uuid4().hex[:8]}", "model": "gpt-test"}, headers=deployment.headers
    )
    assert agent.status_code == 201, agent.text
    thread = await client.post("/v1/threads", json={"agent_id": agent.json()["id"]}, headers=deployment.headers)
    return str(thread.json()["id"])


async def test_a_run_created_on_one_replica_streams_to_completion_from_the_other(deployment: Deployment) -> None:
    async with httpx.AsyncClient(base_url=deployment.apis[0]) as a, httpx.AsyncClient(base_url=deployment.apis[1]) as b:
        thread = await _thread(a, deployment)
        created = await a.post(f"/v1/threads/{thread}/runs", json={"input": "hello"}, headers=deployment.headers)
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        stream = await b.get(f"/v1/runs/{run_id}/events", headers=deployment.headers, timeout=30)
        events = sse_events(stream.text)
        assert events[-1]["type"] == "run.completed", events
        answer = events[-1]["data"]["answer"]
        assert "hello" in answer
        assert [e["seq"] for e in events] == sorted({e["seq"] for e in events})  # in order, none twice
        assert "".join(e["data"]["text"] for e in events if e["type"] == "message.delta") == answer
    executed = [w.name for w in deployment.workers if any(run_id in line for line in w.log)]
    assert len(executed) == 1  # a worker executed it, not an API process


async def test_readiness_reports_the_job_queue(deployment: Deployment) -> None:
    async with httpx.AsyncClient(base_url=deployment.apis[1]) as b:
        ready = await b.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "queue": {"workers": 2, "queued_runs": 0}}


async def _model_calls(worker: Process) -> float:
    """The model calls a worker made, as its metrics port says."""
    assert worker.metrics is not None
    async with httpx.AsyncClient() as scraper:
        scraped = await scraper.get(worker.metrics)
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    families = {family.name: family for family in text_string_to_metric_families(scraped.text)}
    assert {"threadline_workers", "threadline_queued_runs", "threadline_runs_executing"} <= families.keys()
    calls = families["threadline_model_call_duration_seconds"].samples
    return sum(s.value for s in calls if s.name.endswith("_count") and s.labels["outcome"] == "ok")


async def test_each_worker_serves_its_metrics_counting_the_model_calls_of_the_runs_it_executed(
    deployment: Deployment,
) -> None:
    workers = [w for w in deployment.workers if w.metrics is not None]
    assert len(workers) == 2
    before = [await _model_calls(w) for w in workers]
    async with httpx.AsyncClient(base_url=deployment.apis[0], timeout=60) as a:
        threads = await asyncio.gather(*(_thread(a, deployment) for _ in range(6)))
        streams = await asyncio.gather(
            *(
                a.post(f"/v1/threads/{t}/runs", json={"input": "count me", "stream": True}, headers=deployment.headers)
                for t in threads
            )
        )
    ends = [sse_events(stream.text)[-1] for stream in streams]
    assert [e["type"] for e in ends] == ["run.completed"] * 6
    run_ids = [e["data"]["run_id"] for e in ends]
    executed = [sum(r in "".join(w.log) for r in run_ids) for w in workers]  # one model call per run
    after = [await _model_calls(w) for w in workers]
    assert sum(after) - sum(before) == 6
    assert [a - b for a, b in zip(after, before, strict=True)] == executed


async def test_each_process_listens_on_one_connection_and_a_worker_for_new_jobs_on_one_more(
    deployment: Deployment,
) -> None:
    """PostgreSQL wakes every listening connection of the database for each notification a run sends: an API replica
    hears run events, catalog changes and key revocations on one connection; a worker catalog changes on one (and
    new jobs on its job queue's)."""
    async with await psycopg.AsyncConnection.connect(libpq_dsn(deployment.env["THREADLINE_DATABASE_URL"])) as admin:
        found = await admin.execute(
            "SELECT query FROM pg_stat_activity WHERE query LIKE %s AND datname = current_database()", ("LISTEN %",)
        )
        statements = [str(row[0]) for row in await found.fetchall()]
    # (procrastinate's own listening connection, a worker's, is not looked at: it may have sent other queries since)
    ours = Counter(frozenset(re.findall(r"LISTEN (\w+)", s)) for s in statements if "procrastinate" not in s)
    api = frozenset({CHANNEL, pg_catalog_changes.CHANNEL, key_revocations.CHANNEL})
    assert ours == {api: 2, frozenset({pg_catalog_changes.CHANNEL}): 2}


async def test_cancel_through_one_replica_stops_the_run_a_worker_holds(deployment: Deployment) -> None:
    held = deployment.model.hold(first_text="thinking")
    async with httpx.AsyncClient(base_url=deployment.apis[0]) as a, httpx.AsyncClient(base_url=deployment.apis[1]) as b:
        thread = await _thread(a, deployment)
        created = await a.post(f"/v1/threads/{thread}/runs", json={"input": "ponder"}, headers=deployment.headers)
        run_id = created.json()["id"]
        await asyncio.wait_for(held.received.wait(), 30)
        cancelled = await b.post(f"/v1/runs/{run_id}/cancel", headers=deployment.headers)
        assert cancelled.status_code == 200, cancelled.text
        await asyncio.wait_for(held.abandoned.wait(), 1)  # the model call was stopped within a second
        stream = await a.get(f"/v1/runs/{run_id}/events", headers=deployment.headers, timeout=30)
        assert sse_events(stream.text)[-1]["type"] == "run.cancelled"
        run = (await b.get(f"/v1/runs/{run_id}", headers=deployment.headers)).json()
    assert run["status"] == "cancelled"


async def test_many_runs_spread_over_both_workers_and_each_completes_once_in_thread_order(
    deployment: Deployment,
) -> None:
    """200 runs: 100 threads with one run, and 20 threads with five, each created as soon as the one before
    it on the thread has ended."""
    plan = [1] * 100 + [5] * 20
    async with httpx.AsyncClient(base_url=deployment.apis[0], timeout=120) as a:
        threads = await asyncio.gather(*(_thread(a, deployment) for _ in plan))

        async def runs(thread: str, count: int, index: int) -> list[dict[str, Any]]:
            ends = []
            for number in range(count):
                body = {"input": f"question {index}.{number}", "stream": True}
                stream = await a.post(f"/v1/threads/{thread}/runs", json=body, headers=deployment.headers)
                assert stream.status_code == 201, stream.text
                ends.append(sse_events(stream.text)[-1])
            return ends

        per_thread = await asyncio.gather(
            *(runs(t, count, i) for i, (t, count) in enumerate(zip(threads, plan, strict=True)))
        )
        ends = [end for thread_ends in per_thread for end in thread_ends]
        assert [e["type"] for e in ends] == ["run.completed"] * 200
        for index, (thread, count) in enumerate(zip(threads, plan, strict=True)):
            page = await a.get(f"/v1/threads/{thread}/messages?limit=100", headers=deployment.headers)
            listed = [(m["role"], m["content"][0]["text"]) for m in page.json()["data"]]
            expected = []
            for number in range(count):  # in creation order, no step or message twice
                question = f"question {index}.{number}"
                expected += [("user", question), ("assistant", f"You said: {question}")]
            assert listed == expected
    run_ids = [e["data"]["run_id"] for e in ends]
    logs = ["".join(w.log) for w in deployment.workers]
    per_worker = [sum(r in log for r in run_ids) for log in logs]
    assert sum(per_worker) == 200 and all(per_worker), per_worker


async def test_a_new_api_process_started_next_to_a_live_one_leaves_its_runs_alone(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The in-process executor on PostgreSQL: an API process that starts (a rolling deploy) recovers only
    the runs of processes that stopped; the runs a live one executes end as that one ends them."""
    assert POSTGRES_URL is not None
    started: list[Process] = []
    async with off_the_loop(postgres_database(POSTGRES_URL, "threadline_replicas")) as url:
        try:
            async with FakeOpenAI(responder=echo_text, record_requests=False) as model:
                env = _environment(url, model, tmp_path_factory.mktemp("data"), "in_process")
                await threadline(env, "migrate")
                port_a, port_b = free_port(), free_port()
                args = ("serve", "--no-migrate", "--port")
                api_a = asyncio.create_task(_start("api-a", env, *args, str(port_a), ready="Uvicorn running on"))
                try:
                    headers = await _organization(env, migrate=False)  # while A starts
                finally:
                    started.append(await api_a)
                held = [model.hold() for _ in range(5)]
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_a}", timeout=60) as a:
                    live = Deployment(apis=[], workers=[], headers=headers, model=model, env=env)
                    runs = []
                    for index in range(5):
                        thread = await _thread(a, live)
                        created = await a.post(
                            f"/v1/threads/{thread}/runs", json={"input": f"q{index}"}, headers=headers
                        )
                        runs.append(created.json()["id"])
                    await asyncio.wait_for(asyncio.gather(*(h.received.wait() for h in held)), 30)  # all at the model
                    started.append(await _start("api-b", env, *args, str(port_b), ready="Uvicorn running on"))
                    for reply in held:
                        reply.release()
                    streams = [await a.get(f"/v1/runs/{run_id}/events", headers=headers) for run_id in runs]
            types = [[e["type"] for e in sse_events(stream.text)] for stream in streams]
            assert [t[-1] for t in types] == ["run.completed"] * 5
            assert not any("run.failed" in t for t in types)
            assert not any("recovered runs" in line for line in started[1].log)
        finally:
            await asyncio.gather(*(p.stop() for p in started))


async def test_followers_that_subscribe_right_after_creating_runs_all_get_the_terminal_event(
    deployment: Deployment,
) -> None:
    async with (
        httpx.AsyncClient(base_url=deployment.apis[0], timeout=120) as a,
        httpx.AsyncClient(base_url=deployment.apis[1], timeout=120) as b,
    ):
        agent = await a.post("/v1/agents", json={"name": "Quick followers"}, headers=deployment.headers)

        async def follow() -> list[dict[str, Any]]:
            thread = await a.post("/v1/threads", json={"agent_id": agent.json()["id"]}, headers=deployment.headers)
            run = await a.post(
                f"/v1/threads/{thread.json()['id']}/runs", json={"input": "hi"}, headers=deployment.headers
            )
            assert run.status_code == 201, run.text
            stream = await b.get(f"/v1/runs/{run.json()['id']}/events", headers=deployment.headers)
            assert stream.status_code == 200, stream.text
            return sse_events(stream.text)

        followed = await asyncio.gather(*(follow() for _ in range(200)))
    assert [events[-1]["type"] for events in followed] == ["run.completed"] * 200
    assert all([e["seq"] for e in events] == list(range(1, len(events) + 1)) for events in followed)


async def test_an_integration_deleted_through_one_replica_is_disconnected_by_the_others_at_once(
    deployment: Deployment,
) -> None:
    async with (
        FakeMcpServer() as server,
        httpx.AsyncClient(base_url=deployment.apis[0], timeout=30) as a,
        httpx.AsyncClient(base_url=deployment.apis[1], timeout=30) as b,
    ):
        body = {"name": "Short-lived tools", "url": server.url}
        created = await a.post("/v1/mcp-integrations", json=body, headers=deployment.headers)
        assert created.status_code == 201, created.text
        integration = f"/v1/mcp-integrations/{created.json()['id']}"
        listed = await b.get(f"{integration}/tools", headers=deployment.headers)
        assert [t["name"] for t in listed.json()["data"]] == [t.name for t in server.tools]
        await asyncio.wait_for(server.wait_listening(1), 10)  # B keeps a session open, listening for changes
        deleted = await a.delete(integration, headers=deployment.headers)
        assert deleted.status_code == 204, deleted.text
        await asyncio.wait_for(server.wait_listening(0), 5)  # B closed it at once, not after 300 s idle


async def test_a_template_created_through_one_replica_is_announced_to_mcp_clients_of_the_other(
    deployment: Deployment,
) -> None:
    tenant = Tenant(id="", slug="", admin=deployment.headers)
    async with httpx.AsyncClient(base_url=deployment.apis[0], timeout=30) as a:
        agent = await a.post("/v1/agents", json={"name": "Briefer"}, headers=deployment.headers)
        assert agent.status_code == 201, agent.text
        async with (
            mcp_client(deployment.apis[1], tenant) as session,
            session.listen(tools_list_changed=True) as changes,
        ):
            before = {t.name for t in (await session.list_tools()).tools}
            await create_template(a, tenant, agent.json())
            await asyncio.wait_for(anext(aiter(changes)), 10)
            after = {t.name for t in (await session.list_tools()).tools}
    assert after - before == {"brief_me"}


@contextlib.asynccontextmanager
async def _replaced(deployment: Deployment, stopped: Process) -> AsyncIterator[None]:
    """A new worker takes the place of one that stopped, for the tests after this one; it starts meanwhile."""
    starting = asyncio.create_task(_start(f"{stopped.name}-next", deployment.env, "worker", ready="Starting worker"))
    try:
        yield
    finally:
        deployment.workers.remove(stopped)
        deployment.workers.append(await starting)


@dataclass
class Follower:
    """An SSE follower reading a run's events as they come."""

    events: list[dict[str, Any]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def follow(self, client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> None:
        async with client.stream("GET", url, headers=headers) as stream:
            assert stream.status_code == 200
            async for line in stream.aiter_lines():
                if line.startswith("data: "):
                    self.events.extend(sse_events(line))
                    self.arrived.set()

    async def until(self, count: int, of_type: str) -> None:
        while sum(e["type"] == of_type for e in self.events) < count:
            self.arrived.clear()
            await self.arrived.wait()


async def test_a_run_whose_worker_is_killed_mid_answer_streams_on_to_its_end_with_no_number_twice(
    deployment: Deployment,
) -> None:
    """The worker is killed while its text deltas reach a follower; another takes the run over. The follower,
    connected throughout, gets every later event and the terminal one; a reconnect with Last-Event-ID of a
    delta it saw gets the rest, each event once."""
    held = deployment.model.hold(first_text="one two three four")
    async with (
        httpx.AsyncClient(base_url=deployment.apis[0], timeout=60) as a,
        httpx.AsyncClient(base_url=deployment.apis[1], timeout=60) as b,
    ):
        thread = await _thread(a, deployment)
        created = await a.post(f"/v1/threads/{thread}/runs", json={"input": "a long one"}, headers=deployment.headers)
        run_id = created.json()["id"]
        url = f"/v1/runs/{run_id}/events"
        follower = Follower()
        following = asyncio.create_task(follower.follow(b, url, deployment.headers))
        await asyncio.wait_for(follower.until(4, "message.delta"), 30)  # the first holder's deltas came
        seen_before = [e["seq"] for e in follower.events]
        [holder] = [w for w in deployment.workers if any(run_id in line for line in w.log)]
        holder.process.kill()
        await holder.process.wait()
        async with _replaced(deployment, holder):
            await asyncio.wait_for(following, LOST_SECONDS + 30)  # it ends: the terminal event came
            everything = sse_events((await b.get(url, headers=deployment.headers)).text)
            resumed = await a.get(url, headers=deployment.headers | {"Last-Event-ID": str(seen_before[-2])})
            listed = (await a.get(f"/v1/threads/{thread}/messages", headers=deployment.headers)).json()["data"]

    followed = [e["seq"] for e in follower.events]
    assert follower.events[-1]["type"] == "run.completed", follower.events
    assert followed == sorted(set(followed))  # in order, none twice
    assert followed == [e["seq"] for e in everything]  # nothing the run stored or sent later was missed
    answer = follower.events[-1]["data"]["answer"]
    after_takeover = [e for e in follower.events if e["seq"] > seen_before[-1]]
    assert "".join(e["data"]["text"] for e in after_takeover if e["type"] == "message.delta") == answer
    rest = [e["seq"] for e in sse_events(resumed.text)]
    assert rest == [seq for seq in followed if seq > seen_before[-2]]  # the rest, each once, from where it was
    assert [m["role"] for m in listed] == ["user", "assistant"]
    assert held.abandoned.is_set()


async def test_a_follower_gets_the_end_of_a_run_though_its_replicas_listening_connection_was_cut(
    deployment: Deployment,
) -> None:
    """Real processes whose listening connections are cut as a run goes on (the events published before they
    listen again are read from storage: tests/integration/test_worker_mode_gaps.py shows that step by step)."""
    held = deployment.model.hold(first_text="wait for it")
    async with (
        httpx.AsyncClient(base_url=deployment.apis[0], timeout=60) as a,
        httpx.AsyncClient(base_url=deployment.apis[1], timeout=60) as b,
        await psycopg.AsyncConnection.connect(libpq_dsn(deployment.env["THREADLINE_DATABASE_URL"])) as admin,
    ):
        await admin.set_autocommit(True)
        thread = await _thread(a, deployment)
        created = await a.post(f"/v1/threads/{thread}/runs", json={"input": "cut"}, headers=deployment.headers)
        follower = Follower()
        following = asyncio.create_task(
            follower.follow(b, f"/v1/runs/{created.json()['id']}/events", deployment.headers)
        )
        await asyncio.wait_for(follower.until(1, "message.delta"), 30)
        cut = await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE query LIKE %s AND datname = current_database()",
            (f"%LISTEN {CHANNEL}%",),  # (a process listens to all its channels in one statement)
        )
        assert len(await cut.fetchall()) >= 2  # the listening connections of the processes, replicas among them
        held.release()  # the rest of the run, published while the replicas listen again (or just after)
        await asyncio.wait_for(following, 10)  # sooner than a follower's heartbeat: once it listens again
    assert follower.events[-1]["type"] == "run.completed"
    seqs = [e["seq"] for e in follower.events]
    assert seqs == sorted(set(seqs))


async def test_a_worker_stopped_with_sigterm_hands_its_run_to_another_that_finishes_it(
    deployment: Deployment,
) -> None:
    held = deployment.model.hold(first_text="begun")
    async with httpx.AsyncClient(base_url=deployment.apis[0], timeout=60) as a:
        thread = await _thread(a, deployment)
        created = await a.post(f"/v1/threads/{thread}/runs", json={"input": "long"}, headers=deployment.headers)
        run_id = created.json()["id"]
        await asyncio.wait_for(held.received.wait(), 30)
        [holder] = [w for w in deployment.workers if any(run_id in line for line in w.log)]
        holder.process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(holder.process.wait(), 30)  # after its 1 s grace, the run goes back
        async with _replaced(deployment, holder):
            held.release()
            stream = await a.get(f"/v1/runs/{run_id}/events", headers=deployment.headers)
            listed = (await a.get(f"/v1/threads/{thread}/messages", headers=deployment.headers)).json()["data"]
    assert sse_events(stream.text)[-1]["type"] == "run.completed"
    assert [m["role"] for m in listed] == ["user", "assistant"]
    assert any("handed back" in line for line in holder.log)


async def test_a_sub_agents_run_ends_with_the_run_that_delegated_to_it_when_their_worker_is_killed(
    deployment: Deployment,
) -> None:
    """A sub-agent's run executes in the task of the run that delegated to it: a worker killed during the sub-agent's
    model call loses both. The delegating run is taken over (and fails: its delegation was in flight), and the
    sub-agent's run ends with it instead of staying in progress."""
    async with httpx.AsyncClient(base_url=deployment.apis[0], timeout=60) as a:
        named = {"name": f"Helper{uuid.uuid4().hex[:8]}", "model": "gpt-test"}
        helper = await a.post("/v1/agents", json=named, headers=deployment.headers)
        lead = await a.post(
            "/v1/agents",
            json={"name": f"Lead{uuid.uuid4().hex[:8]}", "model": "gpt-test", "sub_agent_ids": [helper.json()["id"]]},
            headers=deployment.headers,
        )
        thread = await a.post("/v1/threads", json={"agent_id": lead.json()["id"]}, headers=deployment.headers)
        deployment.model.reply_tool_calls(FakeToolCall(f"agent__{helper.json()['slug']}", {"input": "dig"}))
        held = deployment.model.hold()  # the sub-agent's model call
        created = await a.post(
            f"/v1/threads/{thread.json()['id']}/runs", json={"input": "delegate"}, headers=deployment.headers
        )
        run_id = created.json()["id"]
        await asyncio.wait_for(held.received.wait(), 30)
        [holder] = [w for w in deployment.workers if any(run_id in line for line in w.log)]
        holder.process.kill()
        await holder.process.wait()
        async with _replaced(deployment, holder):
            stream = await asyncio.wait_for(
                a.get(f"/v1/runs/{run_id}/events", headers=deployment.headers), LOST_SECONDS + 20
            )
            children = await a.get("/v1/runs", params={"agent_id": helper.json()["id"]}, headers=deployment.headers)
    ended = sse_events(stream.text)[-1]
    assert (ended["type"], ended["data"]["error"]["code"]) == ("run.failed", "worker_lost")
    assert [(c["status"], (c["error"] or {}).get("code"), c["parent_run_id"]) for c in children.json()["data"]] == [
        ("failed", "worker_lost", run_id)
    ]


async def test_a_run_asked_for_over_mcp_ends_when_its_api_process_is_killed_and_a_live_ones_goes_on(
    deployment: Deployment,
) -> None:
    """A published agent called over MCP answers in the call: its run executes in the API process that serves the
    call, with no job. Two API processes each serve such a call, their model calls held; one is killed. Its run ends
    `interrupted` (a worker ends the runs with no job whose process went silent) instead of staying in progress for
    good; the live process's run is left alone, and its call answers once its model does."""
    ports = [free_port(), free_port()]
    apis: list[Process] = []
    calls: list[asyncio.Task[types.CallToolResult]] = []
    held: list[HeldReply] = []
    tenant = Tenant(id="", slug="", admin=deployment.headers)
    try:
        for i, port in enumerate(ports):
            serve = ("serve", "--no-migrate", "--port", str(port))
            apis.append(await _start(f"api-extra-{i}", deployment.env, *serve, ready="Uvicorn running on"))
        async with httpx.AsyncClient(base_url=deployment.apis[0], timeout=60) as a:
            slug = f"answerer-{uuid.uuid4().hex[:8]}"
            body = {"name": slug, "slug": slug, "model": "gpt-test", "publish_as_mcp": True, "description": "Answers"}
            agent = await a.post("/v1/agents", json=body, headers=deployment.headers)
            assert agent.status_code == 201, agent.text

            async def call(port: int) -> types.CallToolResult:
                async with mcp_client(f"http://127.0.0.1:{port}", tenant) as session:
                    return await session.call_tool(slug, {"input": "take your time"})

            for port in ports:  # one at a time: each call's model request is the one its hold answers
                held.append(deployment.model.hold())
                calls.append(asyncio.create_task(call(port)))
                await asyncio.wait_for(held[-1].received.wait(), 30)
            listed = await a.get("/v1/runs", params={"agent_id": agent.json()["id"]}, headers=deployment.headers)
            live_run, killed_run = sorted(listed.json()["data"], key=lambda r: r["created_at"])
            apis[1].process.kill()
            await apis[1].process.wait()
            with contextlib.suppress(Exception):  # the call and its session end with their server
                await asyncio.wait_for(calls[1], 30)
            stream = await asyncio.wait_for(
                a.get(f"/v1/runs/{killed_run['id']}/events", headers=deployment.headers),
                (SILENCE_OF_THE_STRANDED + 1) * LOST_SECONDS + 20,  # silent, then seen so by a worker for as long
            )
            ended = sse_events(stream.text)[-1]
            assert (ended["type"], ended["data"]["error"]["code"]) == ("run.failed", "interrupted")
            still = await a.get(f"/v1/runs/{live_run['id']}", headers=deployment.headers)
            assert still.json()["status"] == "in_progress"
            held[0].release()
            answered = await asyncio.wait_for(calls[0], 30)
            done = await a.get(f"/v1/runs/{live_run['id']}", headers=deployment.headers)
    finally:
        for hold in held:
            hold.release()
        for task in calls:
            task.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        for api in apis:
            await api.stop()
    assert not answered.is_error and "released" in str(answered.content)
    assert done.json()["status"] == "completed"


async def test_the_runs_of_a_killed_worker_are_taken_over_and_each_ends_once(deployment: Deployment) -> None:
    """Last in this module: it kills a worker."""
    held = [deployment.model.hold() for _ in range(20)]
    async with (
        httpx.AsyncClient(base_url=deployment.apis[0], timeout=60) as a,
        httpx.AsyncClient(base_url=deployment.apis[1], timeout=60) as b,
    ):
        threads = [await _thread(a, deployment) for _ in range(20)]
        runs = []
        for index, thread in enumerate(threads):
            created = await a.post(
                f"/v1/threads/{thread}/runs", json={"input": f"q{index}"}, headers=deployment.headers
            )
            runs.append(created.json()["id"])
        await asyncio.wait_for(asyncio.gather(*(h.received.wait() for h in held)), 30)  # all 20 in flight
        victim = deployment.workers[0]
        lost = [r for r in runs if any(r in line for line in victim.log)]
        victim.process.kill()
        killed_at = asyncio.get_running_loop().time()
        for reply in held:
            reply.release()

        async def ending(run_id: str) -> dict[str, Any]:
            stream = await b.get(f"/v1/runs/{run_id}/events", headers=deployment.headers)
            return sse_events(stream.text)[-1]

        ends = await asyncio.wait_for(asyncio.gather(*(ending(r) for r in runs)), LOST_SECONDS + 20)
        took = asyncio.get_running_loop().time() - killed_at
        for thread in threads:
            listed = (await a.get(f"/v1/threads/{thread}/messages", headers=deployment.headers)).json()["data"]
            assert [m["role"] for m in listed] == ["user", "assistant"]  # answered once, nothing twice
    assert lost, "the killed worker held none of the runs"
    assert [e["type"] for e in ends] == ["run.completed"] * 20
    assert took < LOST_SECONDS + 10
