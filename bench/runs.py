"""Runs: Threadline (API + persistence + tracing export) against a bare loop, and 1,000 runs at once,
with the in-process executor and in worker mode.

    .venv/bin/python -m bench.runs [--backend sqlite|postgresql] [--runs 200] [--concurrency 16]
                                   [--burst 1000] [--burst-latency-ms 1000]
                                   [--executors in_process,1x1,2x2] [--connections 64]

Both sides use the same fake OpenAI-compatible model (a process on loopback) and the same MCP server
(server-everything over Streamable HTTP), with the same run shape: the model calls `echo` once, then
answers, so each run is two model calls and one MCP tool call.

- Threadline: `threadline serve` on a fresh database, tracing exported to a local OTLP receiver; each
  run is POST /v1/threads/{id}/runs, then its event stream until `run.completed`.
- Bare loop: the `openai` SDK and one `mcp` client session in this process, no persistence.

The burst part starts `--burst` runs at once with a model that takes `--burst-latency-ms` per call
and reports the wall time against the ideal (two model calls), the errors and each process's peak memory.

`--executors` lists the deployments measured, each on a fresh database: `in_process` (one `threadline serve`
that executes its runs) and `AxW`, worker mode (PostgreSQL): A `threadline serve` replicas that queue runs
and W `threadline worker` processes that execute them. Runs are spread round-robin over the API replicas and
followed on the replica that created them. Every deployment gets `--connections` PostgreSQL connections in
all (THREADLINE_DATABASE_POOL_SIZE per process is sized to fit; README "Worker mode"); a worker executes
up to `--burst` / W runs at once in the burst, as the in-process server executes `--burst`. The table at the
end gives ratios against `in_process` measured in the same invocation.
"""

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field

import httpx
from mcp import Client
from openai import AsyncOpenAI

from bench._server import Deployment, database, deployment
from tests.fakes.otlp_receiver import OtlpReceiver
from tests.mcp_servers import everything

TOOL = "everything__echo"


@dataclass(frozen=True)
class Executor:
    """in_process: one API process that executes its runs; AxW: A API replicas and W workers (worker mode)."""

    name: str
    apis: int = 1
    workers: int = 0

    @classmethod
    def parse(cls, text: str) -> "Executor":
        if text == "in_process":
            return cls(text)
        apis, _, workers = text.partition("x")
        if not (apis.isdigit() and workers.isdigit() and int(apis) > 0 and int(workers) > 0):
            raise argparse.ArgumentTypeError(f"{text!r}: an executor is in_process or AxW, e.g. 2x2")
        return cls(text, int(apis), int(workers))

    @property
    def processes(self) -> int:
        return self.apis + self.workers

    def pool_size(self, connections: int) -> int:
        """THREADLINE_DATABASE_POOL_SIZE for every process, so that the deployment opens at most `connections`:
        a process opens twice its pool size, and in worker mode half of it more for the job queue (at least 2)
        and 2 for run events."""
        budget = connections // self.processes
        if not self.workers:
            return max(1, budget // 2)
        size = 1
        while 2 * (size + 1) + max(2, (size + 1) // 2) + 2 <= budget:
            size += 1
        return size

    def env(self, connections: int, runs_at_once: int | None = None) -> dict[str, str]:
        env = {"THREADLINE_DATABASE_POOL_SIZE": str(self.pool_size(connections))}
        if runs_at_once is not None:
            env["THREADLINE_MAX_CONCURRENT_RUNS"] = str(runs_at_once)
            if self.workers:
                env["THREADLINE_WORKER_CONCURRENCY"] = str(-(-runs_at_once // self.workers))
        return env


@asynccontextmanager
async def threadline(backend: str, executor: Executor, env: dict[str, str]) -> AsyncIterator[Deployment]:
    """A fresh database and a deployment on it, set up and torn down off the event loop (they block)."""
    stack = ExitStack()
    try:
        url = await asyncio.to_thread(stack.enter_context, database(backend))
        yield await asyncio.to_thread(stack.enter_context, deployment(url, executor.apis, executor.workers, env))
    finally:
        await asyncio.to_thread(stack.close)


@asynccontextmanager
async def fake_model(latency_ms: float) -> AsyncIterator[str]:
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is measured
        [
            sys.executable,
            "-m",
            "tests.fakes.openai_server",
            "--port",
            "0",
            "--latency-ms",
            str(latency_ms),
            "--script",
            "tool-then-text",
            "--tool-name",
            TOOL,
            "--tool-args",
            '{"message": "hi"}',
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("listening on "):
        raise RuntimeError(f"the fake model did not start: {line!r}")
    try:
        yield line.removeprefix("listening on ").strip()
    finally:
        process.terminate()
        process.wait(timeout=30)


async def setup(running: Deployment, mcp_url: str, threads: int) -> tuple[list[httpx.AsyncClient], list[str]]:
    """A client per API replica, and `threads` threads of an agent that uses the MCP server."""
    clients = [
        httpx.AsyncClient(
            base_url=api.base_url,
            headers=api.headers,
            timeout=600,
            limits=httpx.Limits(max_connections=2_000, max_keepalive_connections=2_000),
        )
        for api in running.apis
    ]
    client = clients[0]
    integration = (await client.post("/v1/mcp-integrations", json={"name": "Everything", "url": mcp_url})).json()
    agent = (
        await client.post(
            "/v1/agents", json={"name": "Bench", "model": "bench-model", "mcp_integration_ids": [integration["id"]]}
        )
    ).json()
    ids: list[str] = []
    for start in range(0, threads, 50):
        batch = await asyncio.gather(
            *(client.post("/v1/threads", json={"agent_id": agent["id"]}) for _ in range(min(50, threads - start)))
        )
        ids += [t.json()["id"] for t in batch]
    return clients, ids


RUN_TIMEOUT_SECONDS = 120.0
"""A run not ended by then counts as an error ("timeout"): a run left queued must not hang the benchmark."""


async def one_run(client: httpx.AsyncClient, thread_id: str) -> tuple[float, str]:
    """How long the run took, and how it ended: completed, failed, ..., `http <status>` or timeout."""
    began = time.perf_counter()
    status = "failed"
    try:
        async with asyncio.timeout(RUN_TIMEOUT_SECONDS):
            created = await client.post(f"/v1/threads/{thread_id}/runs", json={"input": "please echo"})
            if created.status_code != 201:
                return time.perf_counter() - began, f"http {created.status_code}"
            async with client.stream("GET", f"/v1/runs/{created.json()['id']}/events") as events:
                async for line in events.aiter_lines():
                    if line.startswith("event: run."):
                        status = line.removeprefix("event: run.")
    except TimeoutError:
        status = "timeout"
    return time.perf_counter() - began, status


async def drive(runs: int, concurrency: int, run_once) -> tuple[float, list[float], int]:  # type: ignore[no-untyped-def]
    remaining = list(range(runs))
    durations: list[float] = []
    errors = 0

    async def worker() -> None:
        nonlocal errors
        while remaining:
            index = remaining.pop()
            duration, ok = await run_once(index)
            durations.append(duration)
            errors += 0 if ok else 1

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - began, durations, errors


@dataclass
class Measured:
    executor: Executor
    runs_per_second: float = float("nan")
    p50_run: float = float("nan")
    """Seconds from POST to run.completed, median."""
    errors: int = 0
    cpu_per_run: dict[str, float] = field(default_factory=dict)
    """Each process's CPU seconds per run (the run shape)."""
    burst_wall: float = float("nan")
    burst_errors: int = 0
    burst_memory: dict[str, float] = field(default_factory=dict)


async def threadline_side(
    backend: str, executor: Executor, model_url: str, mcp_url: str, runs: int, concurrency: int, connections: int
) -> tuple[float, float, int, dict[str, float]]:
    """Runs/s, median seconds per run, errors and each process's CPU seconds per run."""
    async with OtlpReceiver() as receiver:
        env = executor.env(connections) | {
            "THREADLINE_OPENAI_API_KEY": "sk-bench",
            "THREADLINE_OPENAI_BASE_URL": model_url,
            "THREADLINE_LANGFUSE_PUBLIC_KEY": "pk-lf-bench",
            "THREADLINE_LANGFUSE_SECRET_KEY": "sk-lf-bench",
            "THREADLINE_LANGFUSE_BASE_URL": receiver.base_url,
            "THREADLINE_MCP_ALLOWED_NETWORKS": "127.0.0.0/8",
            "THREADLINE_SECRET_KEY": "bench",
        }
        async with threadline(backend, executor, env) as running:
            warm_up = min(runs, 20 * executor.apis)
            clients, threads = await setup(running, mcp_url, runs + warm_up)

            async def run_once(index: int) -> tuple[float, bool]:
                # round-robin over the API replicas; a run is followed on the replica that created it
                duration, status = await one_run(clients[index % len(clients)], threads[index])
                return duration, status == "completed"

            try:
                await drive(warm_up, concurrency, lambda i: run_once(runs + i))  # sessions, caches, connections
                print(f"{backend} {executor.name}: warmed up, measuring {runs} runs", file=sys.stderr, flush=True)
                cpu_before = running.cpu_seconds()
                wall, durations, errors = await drive(runs, concurrency, run_once)
                cpu = {name: (spent - cpu_before[name]) / runs for name, spent in running.cpu_seconds().items()}
            finally:
                for client in clients:
                    await client.aclose()
        return runs / wall, statistics.median(durations), errors, cpu


async def bare_side(model_url: str, mcp_url: str, runs: int, concurrency: int) -> tuple[float, float, int]:
    model = AsyncOpenAI(api_key="sk-bench", base_url=model_url)
    async with Client(mcp_url, cache=None) as mcp:
        listed = await mcp.list_tools()
        tools = [
            {
                "type": "function",
                "function": {
                    "name": f"everything__{t.name}",
                    "description": t.description or "",
                    "parameters": t.input_schema,
                },
            }
            for t in listed.tools
        ]

        async def run_once(_index: int) -> tuple[float, bool]:
            began = time.perf_counter()
            messages: list[dict] = [{"role": "user", "content": "please echo"}]
            first = await model.chat.completions.create(model="bench-model", messages=messages, tools=tools)  # type: ignore[arg-type]
            call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
            name = call.function.name.removeprefix("everything__")
            result = await mcp.call_tool(name, json.loads(call.function.arguments))
            messages.append(first.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result.content[0].text})  # type: ignore[union-attr]
            final = await model.chat.completions.create(model="bench-model", messages=messages, tools=tools)  # type: ignore[arg-type]
            return time.perf_counter() - began, bool(final.choices[0].message.content)

        await drive(min(runs, 20), concurrency, run_once)
        wall, durations, errors = await drive(runs, concurrency, run_once)
    await model.close()
    return runs / wall, statistics.median(durations) / 2, errors


async def burst(
    backend: str, executor: Executor, model_url: str, mcp_url: str, count: int, latency_ms: float, connections: int
) -> tuple[float, int, dict[str, float]]:
    """Wall time, errors and each process's peak memory (MB) of `count` runs started at once."""
    env = executor.env(connections, runs_at_once=count) | {
        "THREADLINE_OPENAI_API_KEY": "sk-bench",
        "THREADLINE_OPENAI_BASE_URL": model_url,
        "THREADLINE_MCP_ALLOWED_NETWORKS": "127.0.0.0/8",
        "THREADLINE_SECRET_KEY": "bench",
    }
    async with threadline(backend, executor, env) as running:
        clients, threads = await setup(running, mcp_url, count)
        try:
            began = time.perf_counter()
            results = await asyncio.gather(
                *(one_run(clients[i % len(clients)], t) for i, t in enumerate(threads)), return_exceptions=True
            )
            wall = time.perf_counter() - began
        finally:
            for client in clients:
                await client.aclose()
        memory = running.peak_memory_mb()
    outcomes = Counter(type(r).__name__ if isinstance(r, BaseException) else r[1] for r in results)
    errors = sum(n for outcome, n in outcomes.items() if outcome != "completed")
    ideal = 2 * latency_ms / 1000
    print(
        f"{backend} {executor.name}: {count} concurrent runs, model latency {latency_ms:.0f} ms/call: "
        f"wall {wall:.2f} s (ideal {ideal:.1f} s, {wall / ideal:.2f}x), errors {errors}, peak memory "
        + ", ".join(f"{name} {mb:.0f} MB" for name, mb in memory.items())
        + f"; outcomes {dict(outcomes)}",
        flush=True,
    )
    return wall, errors, memory


def table(backend: str, args: argparse.Namespace, measured: list[Measured]) -> str:
    """One line per executor, with ratios against in_process (runs/s: higher is better; times: lower)."""
    base = next((m for m in measured if m.executor.name == "in_process"), None)

    def ratio(value: float, reference: float | None) -> str:
        return f"{value / reference:5.2f}x" if reference and value == value else "     -"  # nan: not measured

    lines = [
        f"{backend}: {args.runs} runs of model -> MCP tool -> model, {args.concurrency} at a time, zero-latency "
        f"model; burst: {args.burst} runs at once, model {args.burst_latency_ms:.0f} ms/call; "
        f"{args.connections} database connections per deployment",
        f"{'executor':<11} {'pool':>4} {'runs/s':>7} {'vs in':>6} {'p50 run':>8} {'vs in':>6} {'err':>4} "
        f"{'CPU/run':>8} | "
        f"{'burst s':>8} {'vs in':>6} {'err':>4} | peak memory per process (burst)",
    ]
    for m in measured:
        memory = ", ".join(f"{name} {mb:.0f} MB" for name, mb in m.burst_memory.items()) or "-"
        lines.append(
            f"{m.executor.name:<11} {m.executor.pool_size(args.connections):>4} {m.runs_per_second:7.1f} "
            f"{ratio(m.runs_per_second, base and base.runs_per_second)} {m.p50_run * 1000:6.0f}ms "
            f"{ratio(m.p50_run, base and base.p50_run)} {m.errors:>4} {sum(m.cpu_per_run.values()) * 1000:6.0f}ms | "
            f"{m.burst_wall:7.2f}s "
            f"{ratio(m.burst_wall, base and base.burst_wall)} {m.burst_errors:>4} | {memory}"
        )
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> None:
    executors: list[Executor] = args.executors
    if args.backend == "sqlite" and any(e.workers for e in executors):
        raise SystemExit("worker mode needs PostgreSQL: --backend postgresql")
    measured = [Measured(e) for e in executors]
    everything.entry_file()
    async with everything.EverythingHttpServer() as mcp:
        async with fake_model(0) as model_url:
            for m in measured:
                m.runs_per_second, m.p50_run, m.errors, m.cpu_per_run = await threadline_side(
                    args.backend, m.executor, model_url, mcp.url, args.runs, args.concurrency, args.connections
                )
                print(
                    f"{args.backend} {m.executor.name}: {m.runs_per_second:7.1f} runs/s, median run "
                    f"{m.p50_run * 1000:6.1f} ms, errors {m.errors}, CPU per run "
                    + ", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in m.cpu_per_run.items()),
                    flush=True,
                )
            bare = await bare_side(model_url, mcp.url, args.runs, args.concurrency)
        ours = next((m for m in measured if m.executor.name == "in_process"), measured[0])
        per_step = ours.p50_run / 2
        print(
            f"{args.backend}: {args.runs} runs, {args.concurrency} at a time, zero-latency model:\n"
            f"  Threadline ({ours.executor.name}): {ours.runs_per_second:7.1f} runs/s, median per-step latency "
            f"{per_step * 1000:6.1f} ms, errors {ours.errors}\n"
            f"  bare loop:  {bare[0]:7.1f} runs/s, median per-step latency {bare[1] * 1000:6.1f} ms, errors {bare[2]}\n"
            f"  ratio (bare / Threadline runs/s): {bare[0] / ours.runs_per_second:.2f}x",
            flush=True,
        )
        if args.burst:
            async with fake_model(args.burst_latency_ms) as model_url:
                for m in measured:
                    m.burst_wall, m.burst_errors, m.burst_memory = await burst(
                        args.backend,
                        m.executor,
                        model_url,
                        mcp.url,
                        args.burst,
                        args.burst_latency_ms,
                        args.connections,
                    )
    print(table(args.backend, args, measured), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--burst-latency-ms", type=float, default=1000)
    parser.add_argument(
        "--executors",
        type=lambda text: [Executor.parse(e) for e in text.split(",")],
        default=[Executor("in_process")],
        help="in_process and/or AxW (A API replicas, W workers; worker mode, PostgreSQL), e.g. in_process,1x1,2x2",
    )
    parser.add_argument(
        "--run-timeout", type=float, default=RUN_TIMEOUT_SECONDS, help="seconds after which a run counts as an error"
    )
    parser.add_argument(
        "--connections", type=int, default=64, help="PostgreSQL connections a deployment may open in all"
    )
    arguments = parser.parse_args()
    RUN_TIMEOUT_SECONDS = arguments.run_timeout
    asyncio.run(main(arguments))
