"""Runs: Threadline (API + persistence + tracing export) against a bare loop, and 1,000 runs at once,
with the in-process executor and in worker mode.

    .venv/bin/python -m bench.runs [--backend sqlite|postgresql] [--runs 200] [--concurrency 16]
                                   [--latency-runs 50] [--rounds 3]
                                   [--burst 1000] [--burst-latency-ms 1000]
                                   [--executors in_process,1x1,2x2] [--connections 64]

Both sides use the same fake OpenAI-compatible model (a process on loopback) and the same MCP server
(server-everything over Streamable HTTP), with the same run shape: the model calls `echo` once, then
answers, so each run is two model calls and one MCP tool call.

- Threadline: `threadline serve` on a fresh database, tracing exported to a local OTLP receiver; each
  run is POST /v1/threads/{id}/runs with `"stream": true`, its event stream read until `run.completed`.
- Bare loop: the `openai` SDK and one `mcp` client session in this process, no persistence.

Each side runs `--runs` runs `--concurrency` at a time (runs/s, and CPU seconds per run: the server
processes', or the bare loop's own), then `--latency-runs` one at a time (p50). One at a time, each deployment's
runs take turns with as many bare-loop runs, in blocks of LATENCY_BLOCK back to back (ours, bare, ours, ...):
the two medians come from the same minute of the machine, so a busy spell no longer lands on one side only. The
ratio at concurrency 1 is to those bare runs (made while the deployment is up, idle); the ratio to the bare
loop's own p50, measured alone after the deployments, is printed beside it.
The burst part starts `--burst` runs at once with a model that takes `--burst-latency-ms` per call
and reports the wall time against the ideal (two model calls), the errors and each process's peak memory;
the bare loop's burst runs in a process of its own, for its peak memory.

The whole measurement is done `--rounds` times; the closing table has the medians, how far the rounds spread,
and each figure's ratio to the bare loop of the same round (the machine may be busy: compare ratios).
THREADLINE_BENCH_PROFILE=<file> samples the first API process with py-spy while the run shape is measured
(THREADLINE_BENCH_PROFILE_PROCESS=worker-0: that process); THREADLINE_BENCH_PROFILE_BURST=<file> samples it
during the burst.

`--executors` lists the deployments measured, each on a fresh database: `in_process` (one `threadline serve`
that executes its runs) and `AxW`, worker mode (PostgreSQL): A `threadline serve` replicas that queue runs
and W `threadline worker` processes that execute them. Runs are spread round-robin over the API replicas and
followed on the replica that created them. Every deployment gets `--connections` PostgreSQL connections in
all (THREADLINE_DATABASE_POOL_SIZE per process is sized to fit; README "Worker mode"); a worker executes
up to `--burst` / W runs at once in the burst, as the in-process server executes `--burst`. `agno` is Agno
AgentOS doing the same runs (bench/agentos.py installs it into a venv of its own the first time). The table at the
end gives ratios against `in_process` measured in the same invocation.
"""

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from mcp import Client
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from bench import agentos
from bench._server import (
    MCP_TOOL,
    Deployment,
    RunningProcess,
    database,
    deployment,
    fake_model,
    machine_cpu_seconds,
    peak_memory_mb,
)
from tests.fakes.otlp_receiver import OtlpReceiver
from tests.mcp_servers import everything

TOOL = MCP_TOOL


@dataclass(frozen=True)
class Executor:
    """in_process: one API process that executes its runs; AxW: A API replicas and W workers (worker mode);
    agno: Agno AgentOS doing the same runs (bench/agentos.py), for comparison."""

    name: str
    apis: int = 1
    workers: int = 0

    @classmethod
    def parse(cls, text: str) -> "Executor":
        if text in ("in_process", "agno"):
            return cls(text)
        apis, _, workers = text.partition("x")
        if not (apis.isdigit() and workers.isdigit() and int(apis) > 0 and int(workers) > 0):
            raise argparse.ArgumentTypeError(f"{text!r}: an executor is in_process, AxW (e.g. 2x2) or agno")
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


async def setup(
    running: Deployment, mcp_url: str, threads: int, at_once: int = 1
) -> tuple[list[httpx.AsyncClient], list[str]]:
    """Clients of the API replicas, one per replica for every CLIENT_RUNS of the `at_once` runs (a run i uses
    clients[i % len(clients)]: round-robin over the replicas), and `threads` threads of an agent that uses the MCP
    server."""
    clients = [
        httpx.AsyncClient(
            base_url=api.base_url,
            headers=api.headers,
            timeout=600,
            # A connection idle for 2 s is not reused: the server closes one idle for 5 s (uvicorn's keep-alive),
            # and a request sent on it as it closes would fail with a ReadError.
            limits=httpx.Limits(max_connections=2_000, max_keepalive_connections=2_000, keepalive_expiry=2),
        )
        for _ in range(client_count(at_once))
        for api in running.apis
    ]
    client = clients[0]
    integration = (await client.post("/v1/mcp-integrations", json={"name": "Everything", "url": mcp_url})).json()
    agent = (
        await client.post(
            "/v1/agents", json={"name": "Bench", "model": "bench-model", "mcp_integration_ids": [integration["id"]]}
        )
    ).json()

    async def new_thread() -> str:
        for attempt in range(5):  # a busy machine: a kept-alive connection may be closed as it is reused
            try:
                created = await client.post("/v1/threads", json={"agent_id": agent["id"]})
                if created.status_code == 201:
                    return str(created.json()["id"])
            except httpx.TransportError:
                if attempt == 4:
                    raise
        raise RuntimeError(f"a thread could not be created: {created.status_code} {created.text}")

    ids: list[str] = []
    for start in range(0, threads, 50):
        ids += await asyncio.gather(*(new_thread() for _ in range(min(50, threads - start))))
    return clients, ids


CLIENT_RUNS = 50
"""Runs at once per HTTP client of the benchmark. A client's connection pool looks at each of its connections
whenever a request starts or ends: one client for 1,000 runs at once spent more CPU than the server it measured,
on the same two cores."""


def client_count(at_once: int) -> int:
    return -(-at_once // CLIENT_RUNS)


RUN_TIMEOUT_SECONDS = 120.0
"""A run not ended by then counts as an error ("timeout"): a run left queued must not hang the benchmark."""


async def one_run(client: httpx.AsyncClient, thread_id: str) -> tuple[float, str]:
    """How long the run took, and how it ended: completed, failed, ..., `http <status>` or timeout."""
    began = time.perf_counter()
    status = "failed"
    try:
        async with asyncio.timeout(RUN_TIMEOUT_SECONDS):
            body = {"input": "please echo", "stream": True}
            async with client.stream("POST", f"/v1/threads/{thread_id}/runs", json=body) as events:
                if events.status_code != 201:
                    return time.perf_counter() - began, f"http {events.status_code}"
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
    """Seconds from POST to run.completed, median, at the benchmark's concurrency."""
    p50_one: float = float("nan")
    """The same, one run at a time."""
    errors: int = 0
    cpu_per_run: dict[str, float] = field(default_factory=dict)
    """Each process's CPU seconds per run (the run shape)."""
    other_cpu_per_run: dict[str, float] = field(default_factory=dict)
    """PostgreSQL's and the whole machine's CPU seconds per run (the machine's: every process, the benchmark's
    client, the model and the MCP server included)."""
    burst_wall: float = float("nan")
    burst_errors: int = 0
    burst_memory: dict[str, float] = field(default_factory=dict)
    bare_p50_one: float = float("nan")
    """The bare loop's median run one at a time, its runs taking turns with these (see `measure`)."""


Figures = tuple[float, float, float, int, dict[str, float], dict[str, float], float]
"""Runs/s and median seconds per run at the benchmark's concurrency, median seconds per run one at a time,
errors, each process's CPU seconds per run, PostgreSQL's and the whole machine's, and the bare loop's median
one at a time, measured taking turns with ours."""

RunOnce = Callable[[int], Awaitable[tuple[float, bool]]]
"""The i-th run: how long it took, and whether it completed."""

LATENCY_BLOCK = 10
"""One at a time, a deployment's runs and the bare loop's take turns in blocks of this many, back to back; the
first run of a block is left out of the median (it may meet what the other side left going: a deployment ends a
run's trace and gives back its slot after the run's last event)."""


async def measure(
    name: str,
    run_once: RunOnce,
    bare_once: RunOnce,
    cpu_seconds: Callable[[], dict[str, float]],
    profiled_pid: int | None,
    *,
    runs: int,
    concurrency: int,
    latency_runs: int,
    warm_up: int,
) -> Figures:
    """Warm up, then `runs` runs `concurrency` at a time (sampled by py-spy when asked), then `latency_runs` one at a
    time, taking turns with as many bare-loop runs (LATENCY_BLOCK); `run_once(i)` is the i-th run (the warm-up
    takes runs + 0..warm_up, the ones at a time what follows)."""
    await drive(warm_up, concurrency, lambda i: run_once(runs + i))  # sessions, caches, connections
    print(f"{name}: warmed up, measuring {runs} runs", file=sys.stderr, flush=True)
    cpu_before, other_before = cpu_seconds(), machine_cpu_seconds()
    with profiled(profiled_pid):
        wall, durations, errors = await drive(runs, concurrency, run_once)
    cpu = {process: (spent - cpu_before[process]) / runs for process, spent in cpu_seconds().items()}
    other = {process: (spent - other_before[process]) / runs for process, spent in machine_cpu_seconds().items()}
    one_at_a_time, bare, latency_errors = [], [], 0
    for block in range(0, latency_runs, LATENCY_BLOCK):
        size = min(LATENCY_BLOCK, latency_runs - block)
        for number in range(size):  # back to back
            duration, ok = await run_once(runs + warm_up + block + number)
            one_at_a_time += [duration] if number else []
            latency_errors += 0 if ok else 1
        for number in range(size):
            duration, ok = await bare_once(number)
            bare += [duration] if number and ok else []
            latency_errors += 0 if ok else 1
    p50_one = statistics.median(one_at_a_time) if one_at_a_time else float("nan")
    bare_p50 = statistics.median(bare) if bare else float("nan")
    return runs / wall, statistics.median(durations), p50_one, errors + latency_errors, cpu, other, bare_p50


async def threadline_side(
    backend: str,
    executor: Executor,
    model_url: str,
    mcp_url: str,
    bare_once: RunOnce,
    runs: int,
    concurrency: int,
    connections: int,
    latency_runs: int,
) -> Figures:
    if executor.name == "agno":
        return await agno_side(backend, model_url, mcp_url, bare_once, runs, concurrency, latency_runs)
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
            clients, threads = await setup(running, mcp_url, runs + warm_up + latency_runs)

            async def run_once(index: int) -> tuple[float, bool]:
                # round-robin over the API replicas; a run is followed on the replica that created it
                duration, status = await one_run(clients[index % len(clients)], threads[index])
                return duration, status == "completed"

            try:
                return await measure(
                    f"{backend} {executor.name}",
                    run_once,
                    bare_once,
                    running.cpu_seconds,
                    profiled_process(running.processes),
                    runs=runs,
                    concurrency=concurrency,
                    latency_runs=latency_runs,
                    warm_up=warm_up,
                )
            finally:
                for client in clients:
                    await client.aclose()


async def agno_side(
    backend: str, model_url: str, mcp_url: str, bare_once: RunOnce, runs: int, concurrency: int, latency_runs: int
) -> Figures:
    """The figures of threadline_side, for Agno AgentOS doing the same runs."""
    async with agentos.agno_os(backend, model_url, mcp_url) as running, agentos.client(running) as http:

        async def run_once(_index: int) -> tuple[float, bool]:
            duration, status = await agentos.one_agno_run(http, RUN_TIMEOUT_SECONDS)
            return duration, status == "completed"

        return await measure(
            f"{backend} agno",
            run_once,
            bare_once,
            running.cpu_seconds,
            running.processes[0].pid,
            runs=runs,
            concurrency=concurrency,
            latency_runs=latency_runs,
            warm_up=min(runs, 20),
        )


async def at_once(runs: Sequence[Awaitable[tuple[float, str]]]) -> tuple[float, Counter[str], int]:
    """Wall time of `runs` started at once, how they ended (an exception by its type), and how many did not
    complete."""
    began = time.perf_counter()
    results = await asyncio.gather(*runs, return_exceptions=True)
    wall = time.perf_counter() - began
    outcomes = Counter(type(r).__name__ if isinstance(r, BaseException) else r[1] for r in results)
    return wall, outcomes, sum(n for outcome, n in outcomes.items() if outcome != "completed")


PROFILE = os.environ.get("THREADLINE_BENCH_PROFILE")
"""A file: py-spy (installed apart, e.g. `.venv/bin/pip install py-spy`) samples one process (the first API
process, or the one THREADLINE_BENCH_PROFILE_PROCESS names, e.g. worker-0) while the run shape is measured, and
writes its stacks there (collapsed, one line per stack: `frame;frame;... count`)."""
PROFILE_BURST = os.environ.get("THREADLINE_BENCH_PROFILE_BURST")
"""A file: the same, while the burst runs."""


def profiled_process(processes: list[RunningProcess]) -> int | None:
    """The process sampled in this deployment; None when it has none of that name (in_process has no worker)."""
    name = os.environ.get("THREADLINE_BENCH_PROFILE_PROCESS", processes[0].name)
    return next((p.pid for p in processes if p.name == name), None)


@contextmanager
def profiled(pid: int | None, output: str | None = PROFILE) -> Iterator[None]:
    if not output or pid is None:
        yield
        return
    spy = Path(sys.executable).with_name("py-spy")
    command = [str(spy), "record", "--pid", str(pid), "--format", "raw", "--rate", "250", "--output", output]
    sampler = subprocess.Popen([*command, "--nonblocking", "--threads"], stdout=subprocess.DEVNULL)
    try:
        yield
    finally:
        sampler.send_signal(signal.SIGINT)
        sampler.wait(timeout=60)


@dataclass
class Bare:
    """The bare loop: the openai SDK and one mcp client session, no persistence."""

    runs_per_second: float = float("nan")
    p50_run: float = float("nan")
    """At concurrency 1."""
    errors: int = 0
    burst_wall: float = float("nan")
    burst_errors: int = 0
    burst_memory: float = float("nan")
    """Peak MB of the process that ran the burst."""
    cpu_per_run: float = float("nan")
    """CPU seconds per run of the process that drives the loop (its model and MCP clients)."""
    machine_cpu_per_run: float = float("nan")
    """The whole machine's CPU seconds per run (the model and the MCP server included)."""


@asynccontextmanager
async def bare_loop(model_url: str, mcp_url: str) -> AsyncIterator[RunOnce]:
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
            messages: list[dict[str, Any]] = [{"role": "user", "content": "please echo"}]
            first = await model.chat.completions.create(model="bench-model", messages=messages, tools=tools)  # type: ignore[arg-type]
            call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
            assert isinstance(call, ChatCompletionMessageFunctionToolCall), call
            name = call.function.name.removeprefix("everything__")
            result = await mcp.call_tool(name, json.loads(call.function.arguments))
            messages.append(first.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result.content[0].text})  # type: ignore[union-attr]
            final = await model.chat.completions.create(model="bench-model", messages=messages, tools=tools)  # type: ignore[arg-type]
            return time.perf_counter() - began, bool(final.choices[0].message.content)

        yield run_once
    await model.close()


async def bare_side(run_once: RunOnce, runs: int, concurrency: int, latency_runs: int) -> Bare:
    """The bare loop's own figures, with no deployment up."""
    await drive(min(runs, 20), concurrency, run_once)  # its pooled connections (idle ones expire after 5 s)
    cpu_before, machine_before = time.process_time(), machine_cpu_seconds()["machine"]
    wall, _, errors = await drive(runs, concurrency, run_once)
    cpu = (time.process_time() - cpu_before) / runs
    machine = (machine_cpu_seconds()["machine"] - machine_before) / runs
    _, one_at_a_time, latency_errors = await drive(latency_runs, 1, run_once)
    return Bare(
        runs / wall,
        statistics.median(one_at_a_time),
        errors + latency_errors,
        cpu_per_run=cpu,
        machine_cpu_per_run=machine,
    )


async def bare_burst_here(model_url: str, mcp_url: str, count: int) -> dict[str, float]:
    """`count` bare runs at once in this process (a process of its own, for its peak memory)."""

    async def guarded(run_once: Callable[[int], Awaitable[tuple[float, bool]]], index: int) -> bool:
        try:
            async with asyncio.timeout(RUN_TIMEOUT_SECONDS):
                return (await run_once(index))[1]
        except Exception:
            return False

    async with bare_loop(model_url, mcp_url) as run_once:
        began, own, machine = time.perf_counter(), time.process_time(), machine_cpu_seconds()["machine"]
        results = await asyncio.gather(*(guarded(run_once, i) for i in range(count)))
        wall = time.perf_counter() - began
        own, machine = time.process_time() - own, machine_cpu_seconds()["machine"] - machine
    return {
        "wall": wall,
        "errors": sum(not ok for ok in results),
        "memory": peak_memory_mb(os.getpid()),
        "cpu": own,
        "machine": machine,
    }


async def bare_burst(model_url: str, mcp_url: str, count: int) -> tuple[float, int, float]:
    """Wall time, errors and peak memory (MB) of `count` bare runs at once, in a process of their own."""
    command = [sys.executable, "-m", "bench.runs", "--bare-burst", str(count), "--model-url", model_url]
    process = await asyncio.create_subprocess_exec(*command, "--mcp-url", mcp_url, stdout=subprocess.PIPE)
    out, _ = await process.communicate()
    result = json.loads(out.decode().strip().splitlines()[-1])
    print(f"bare loop burst: CPU seconds bare loop {result['cpu']:.1f}, machine {result['machine']:.1f}", flush=True)
    return result["wall"], int(result["errors"]), result["memory"]


async def burst(
    backend: str, executor: Executor, model_url: str, mcp_url: str, count: int, latency_ms: float, connections: int
) -> tuple[float, int, dict[str, float]]:
    """Wall time, errors and each process's peak memory (MB) of `count` runs started at once."""
    problems: list[str] = []
    cpu: dict[str, float] = {}
    if executor.name == "agno":
        async with agentos.agno_os(backend, model_url, mcp_url) as running_agno, AsyncExitStack() as stack:
            https = [await stack.enter_async_context(agentos.client(running_agno)) for _ in range(client_count(count))]
            wall, outcomes, errors = await at_once(
                [agentos.one_agno_run(https[i % len(https)], RUN_TIMEOUT_SECONDS) for i in range(count)]
            )
            memory = running_agno.peak_memory_mb()
    else:
        env = executor.env(connections, runs_at_once=count) | {
            "THREADLINE_OPENAI_API_KEY": "sk-bench",
            "THREADLINE_OPENAI_BASE_URL": model_url,
            "THREADLINE_MCP_ALLOWED_NETWORKS": "127.0.0.0/8",
            "THREADLINE_SECRET_KEY": "bench",
        }
        async with threadline(backend, executor, env) as running:
            clients, threads = await setup(running, mcp_url, count, at_once=count)
            try:
                cpu_before, machine_before = running.cpu_seconds(), machine_cpu_seconds()
                own_before = time.process_time()
                with profiled(profiled_process(running.processes), PROFILE_BURST):
                    wall, outcomes, errors = await at_once(
                        [one_run(clients[i % len(clients)], t) for i, t in enumerate(threads)]
                    )
                cpu = {name: spent - cpu_before[name] for name, spent in running.cpu_seconds().items()}
                cpu["clients"] = time.process_time() - own_before
                cpu |= {name: spent - machine_before[name] for name, spent in machine_cpu_seconds().items()}
            finally:
                for client in clients:
                    await client.aclose()
            memory, problems = running.peak_memory_mb(), running.problems()
    ideal = 2 * latency_ms / 1000
    print(
        f"{backend} {executor.name}: {count} concurrent runs, model latency {latency_ms:.0f} ms/call: "
        f"wall {wall:.2f} s (ideal {ideal:.1f} s, {wall / ideal:.2f}x), errors {errors}, peak memory "
        + ", ".join(f"{name} {mb:.0f} MB" for name, mb in memory.items())
        + f"; outcomes {dict(outcomes)}"
        + (f"; CPU seconds {', '.join(f'{name} {seconds:.1f}' for name, seconds in cpu.items())}" if cpu else ""),
        flush=True,
    )
    if errors:
        print("\n".join(["the deployment's first warnings and errors:", *problems]), flush=True)
    return wall, errors, memory


def table(backend: str, args: argparse.Namespace, measured: list[Measured]) -> str:
    """One line per executor, with ratios against in_process (runs/s: higher is better; times: lower)."""
    base = next((m for m in measured if m.executor.name == "in_process"), None)

    def ratio(value: float, reference: float | None) -> str:
        return f"{value / reference:5.2f}x" if reference and value == value else "     -"  # nan: not measured

    base_rps, base_p50, base_burst = (base.runs_per_second, base.p50_run, base.burst_wall) if base else (None,) * 3

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
            f"{ratio(m.runs_per_second, base_rps)} {m.p50_run * 1000:6.0f}ms "
            f"{ratio(m.p50_run, base_p50)} {m.errors:>4} {sum(m.cpu_per_run.values()) * 1000:6.0f}ms | "
            f"{shown(m.burst_wall, '.2f', 8, 's')} "
            f"{ratio(m.burst_wall, base_burst)} {m.burst_errors:>4} | {memory}"
        )
    return "\n".join(lines)


def shown(value: float, spec: str, width: int, unit: str = "") -> str:
    """The value formatted, or `-` where it was not measured (nan: no burst, say), right-aligned in `width`."""
    text = f"{value:{spec}}{unit}" if value == value else "-"
    return f"{text:>{width}}"


def median_of(values: Sequence[float]) -> float:
    known = [v for v in values if v == v]
    return statistics.median(known) if known else float("nan")


def spread(values: Sequence[float]) -> str:
    """How far the rounds were from their median, in percent (max - min over median)."""
    known = [v for v in values if v == v]
    middle = median_of(known)
    if len(known) < 2 or not middle:
        return "   -"
    return f"{(max(known) - min(known)) / middle * 100:3.0f}%"


def against_bare(backend: str, args: argparse.Namespace, rounds: list[tuple[list[Measured], Bare]]) -> str:
    """Medians over the rounds, each executor against the bare loop of its round (the goal: p50 <= 2x,
    runs/s >= 1/2.5, burst wall <= 1.5x with no errors, peak memory <= 2x)."""

    def row(name: str, values: list[tuple[float, float, float, float, float]], errors: list[int]) -> str:
        p50, rps, wall, memory, cpu = ([v[i] for v in values] for i in range(5))
        return (
            f"{name:<11} {median_of(p50) * 1000:7.1f}ms {spread(p50)} {median_of(rps):7.1f} {spread(rps)} "
            f"{median_of(cpu) * 1000:6.1f}ms {spread(cpu)} "
            f"{shown(median_of(wall), '.2f', 8, 's')} {spread(wall)} {max(errors):>4} "
            f"{shown(median_of(memory), '.0f', 9, ' MB')}"
        )

    lines = [
        f"{backend}, medians of {len(rounds)} round(s) (spread: (max-min)/median): p50 run at concurrency 1, runs/s "
        f"at concurrency {args.concurrency} (and CPU seconds per run: the server processes', or the bare loop's), "
        f"{args.burst} runs at once with a {args.burst_latency_ms:.0f} ms model (wall, most errors in a round, peak "
        "memory of the busiest process); the bare loop's p50 here is its own, alone: the ratios at concurrency 1 are "
        "to the bare runs that took turns with each executor's",
        f"{'':<11} {'p50 c=1':>9} {'spr':>4} {'runs/s':>7} {'spr':>4} {'CPU/run':>8} {'spr':>4} "
        f"{'burst':>8} {'spr':>4} "
        f"{'err':>4} {'memory':>9}",
    ]
    bare_values = [(b.p50_run, b.runs_per_second, b.burst_wall, b.burst_memory, b.cpu_per_run) for _, b in rounds]
    lines.append(row("bare loop", bare_values, [b.burst_errors + b.errors for _, b in rounds]))
    ratios: list[str] = []
    for index, executor in enumerate(args.executors):
        ours = [(m[index], b) for m, b in rounds]
        values = [
            (
                m.p50_one,
                m.runs_per_second,
                m.burst_wall,
                max(m.burst_memory.values(), default=float("nan")),
                sum(m.cpu_per_run.values()),
            )
            for m, _ in ours
        ]
        lines.append(row(executor.name, values, [m.burst_errors + m.errors for m, _ in ours]))
        p50 = median_of([m.p50_one / m.bare_p50_one for m, _ in ours])  # the runs that took turns with ours
        alone = median_of([m.p50_one / b.p50_run for m, b in ours])
        rps = median_of([b.runs_per_second / m.runs_per_second for m, b in ours])
        wall = median_of([m.burst_wall / b.burst_wall for m, b in ours])
        memory = median_of([max(m.burst_memory.values(), default=float("nan")) / b.burst_memory for m, b in ours])
        ratios.append(
            f"{executor.name:<11} p50 c=1 {p50:4.2f}x the bare loop's (goal <= 2.0; {alone:4.2f}x its p50 alone), "
            f"runs/s 1/{rps:4.2f} of it "
            f"(goal >= 1/2.5), burst wall {shown(wall, '.2f', 4, 'x')} (goal <= 1.5), peak memory "
            f"{shown(memory, '.2f', 4, 'x')} (goal <= 2.0)"
        )
    return "\n".join(
        [
            *lines,
            "ratios to the bare loop (medians of the rounds' ratios; p50 c=1: to the bare runs in turn with ours):",
            *ratios,
        ]
    )


async def one_round(args: argparse.Namespace, mcp_url: str) -> tuple[list[Measured], Bare]:
    measured = [Measured(e) for e in args.executors]
    async with fake_model(0) as model_url, bare_loop(model_url, mcp_url) as bare_once:
        await drive(min(args.runs, 20), args.concurrency, bare_once)
        for m in measured:
            found = await threadline_side(
                args.backend,
                m.executor,
                model_url,
                mcp_url,
                bare_once,
                args.runs,
                args.concurrency,
                args.connections,
                args.latency_runs,
            )
            (
                m.runs_per_second,
                m.p50_run,
                m.p50_one,
                m.errors,
                m.cpu_per_run,
                m.other_cpu_per_run,
                m.bare_p50_one,
            ) = found
            print(
                f"{args.backend} {m.executor.name}: {m.runs_per_second:7.1f} runs/s, median run "
                f"{m.p50_run * 1000:6.1f} ms ({args.concurrency} at a time), {m.p50_one * 1000:6.1f} ms (one at a "
                f"time; the bare loop's taking turns with it {m.bare_p50_one * 1000:.1f} ms), errors {m.errors}, "
                "CPU per run "
                + ", ".join(
                    f"{name} {seconds * 1000:.1f} ms" for name, seconds in (m.cpu_per_run | m.other_cpu_per_run).items()
                ),
                flush=True,
            )
        bare = await bare_side(bare_once, args.runs, args.concurrency, args.latency_runs)
        print(
            f"{args.backend} bare loop: {bare.runs_per_second:7.1f} runs/s, median run {bare.p50_run * 1000:6.1f} ms "
            f"(one at a time), errors {bare.errors}, CPU per run {bare.cpu_per_run * 1000:.1f} ms, machine "
            f"{bare.machine_cpu_per_run * 1000:.0f} ms",
            flush=True,
        )
    if args.burst:
        async with fake_model(args.burst_latency_ms) as model_url:
            for m in measured:
                m.burst_wall, m.burst_errors, m.burst_memory = await burst(
                    args.backend,
                    m.executor,
                    model_url,
                    mcp_url,
                    args.burst,
                    args.burst_latency_ms,
                    args.connections,
                )
            bare.burst_wall, bare.burst_errors, bare.burst_memory = await bare_burst(model_url, mcp_url, args.burst)
            print(
                f"{args.backend} bare loop: {args.burst} concurrent runs: wall {bare.burst_wall:.2f} s, errors "
                f"{bare.burst_errors}, peak memory {bare.burst_memory:.0f} MB",
                flush=True,
            )
    print(table(args.backend, args, measured), flush=True)
    return measured, bare


async def main(args: argparse.Namespace) -> None:
    executors: list[Executor] = args.executors
    if args.backend == "sqlite" and any(e.workers for e in executors):
        raise SystemExit("worker mode needs PostgreSQL: --backend postgresql")
    everything.entry_file()
    rounds: list[tuple[list[Measured], Bare]] = []
    async with everything.EverythingHttpServer() as mcp:
        for number in range(args.rounds):
            print(f"{args.backend}: round {number + 1} of {args.rounds}", file=sys.stderr, flush=True)
            rounds.append(await one_round(args, mcp.url))
    print(against_bare(args.backend, args, rounds), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency-runs", type=int, default=50, help="runs one at a time, for the p50 at c=1")
    parser.add_argument("--rounds", type=int, default=3, help="the whole measurement again; the table has medians")
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
    parser.add_argument("--bare-burst", type=int, help=argparse.SUPPRESS)  # the bare burst's own process
    parser.add_argument("--model-url", help=argparse.SUPPRESS)
    parser.add_argument("--mcp-url", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    RUN_TIMEOUT_SECONDS = arguments.run_timeout
    if arguments.bare_burst:
        found = asyncio.run(bare_burst_here(arguments.model_url, arguments.mcp_url, arguments.bare_burst))
        print(json.dumps(found), flush=True)
    else:
        asyncio.run(main(arguments))
