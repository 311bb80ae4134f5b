"""Start real processes for a benchmark: Threadline on a fresh database (one `threadline serve`, or a
worker-mode deployment: API replicas that queue runs and `threadline worker` processes that execute them), and
the fake OpenAI-compatible model the runs call."""

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import IO

from tests.databases import postgres_database
from tests.servers import free_port

THREADLINE = str(Path(sys.executable).with_name("threadline"))
# e.g. "python -m cProfile -o server.prof": runs the API servers under a profiler.
_PREFIX = os.environ.get("THREADLINE_BENCH_SERVER_PREFIX", "").split()
POSTGRES_SERVER = os.environ.get(
    "THREADLINE_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)
MCP_TOOL = "everything__echo"
"""The tool the fake model calls: server-everything's echo, as an integration named Everything exposes it."""
API_READY = "Uvicorn running on"
WORKER_READY = "Starting worker"


@contextmanager
def database(backend: str) -> Iterator[str]:
    if backend == "sqlite":
        with TemporaryDirectory() as directory:
            yield f"sqlite+aiosqlite:///{directory}/bench.db"
        return
    with postgres_database(POSTGRES_SERVER, "threadline_bench") as url:
        yield url


def peak_memory_mb(pid: int) -> float:
    """A process's peak resident memory so far (Linux: VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) a process has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> dict[str, float]:
    """CPU time spent so far by the whole machine (every core, every process), and by PostgreSQL's processes
    (those alive now: a pooled connection's backend lives as long as the deployment)."""
    ticks = os.sysconf("SC_CLK_TCK")
    first = Path("/proc/stat").read_text().splitlines()[0]  # cpu  user nice system idle iowait irq softirq ...
    user, nice, system, _idle, _iowait, irq, softirq, *_ = (int(v) for v in first.split()[1:])
    postgres = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # ended meanwhile
            continue
        if text.split("(", 1)[1].startswith("postgres)"):
            fields = text.rsplit(")", 1)[1].split()
            postgres += (int(fields[11]) + int(fields[12])) / ticks
    return {"postgres": postgres, "machine": (user + nice + system + irq + softirq) / ticks}


@dataclass(frozen=True)
class RunningServer:
    base_url: str
    headers: dict[str, str]
    """An admin key's auth header, for a new organization."""
    pid: int

    def peak_memory_mb(self) -> float:
        return peak_memory_mb(self.pid)


@dataclass(frozen=True)
class RunningProcess:
    name: str
    """api-0, api-1, ..., worker-0, ..."""
    pid: int


@dataclass(frozen=True)
class Deployment:
    apis: list[RunningServer]
    processes: list[RunningProcess]
    """Every process of the deployment, API replicas first."""
    log: Path
    """The processes' logs, from when they were ready (THREADLINE_BENCH_SERVER_LOG, or a file of the deployment's)."""

    def problems(self, most: int = 20) -> list[str]:
        """The first warning and error lines of the processes' logs (what to look at when runs failed)."""
        found = [line.rstrip() for line in self.log.read_text(errors="replace").splitlines() if _PROBLEM.search(line)]
        return found[:most]

    def peak_memory_mb(self) -> dict[str, float]:
        """Each process's peak resident memory so far, by name."""
        return {p.name: peak_memory_mb(p.pid) for p in self.processes}

    def cpu_seconds(self) -> dict[str, float]:
        """Each process's CPU time so far, by name."""
        return {p.name: cpu_seconds(p.pid) for p in self.processes}


@contextmanager
def _started(command: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """A process started now (`_wait_ready` tells when it is ready), stopped with SIGTERM afterwards."""
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


_PROBLEM = re.compile(r" (WARNING|ERROR|CRITICAL) |Traceback")


def _wait_ready(name: str, process: subprocess.Popen[str], ready: str, log: Path, stack: ExitStack) -> None:
    """Reads the process's log until `ready`, then keeps draining it so it never blocks on a full pipe."""
    assert process.stderr is not None
    seen: list[str] = []
    for line in process.stderr:
        seen.append(line)
        if ready in line:
            break
    else:
        raise RuntimeError(f"{name} did not start:\n{''.join(seen[-30:])}")
    sink: IO[str] = stack.enter_context(open(log, "a"))  # noqa: SIM115
    drain = subprocess.Popen(["cat"], stdin=process.stderr, stdout=sink)
    stack.callback(drain.wait, 60)


@contextmanager
def deployment(
    database_url: str, apis: int = 1, workers: int = 0, extra_env: dict[str, str] | None = None
) -> Iterator[Deployment]:
    """`apis` `threadline serve` processes and `workers` `threadline worker` processes on a migrated database
    with a new organization. With workers, the deployment is in worker mode (THREADLINE_EXECUTOR=queue:
    PostgreSQL); without, each API process executes its runs. Processes are ready when they say so in their log."""
    env = (
        os.environ
        # One organization runs everything: the per-process bounds, not an organization's share, set how many
        # runs execute at once.
        | {"THREADLINE_DATABASE_URL": database_url, "THREADLINE_LOG_LEVEL": "WARNING"}
        | {"THREADLINE_ORG_MAX_CONCURRENT_RUNS": "1000000"}
        | (extra_env or {})
    )
    if workers:
        env["THREADLINE_EXECUTOR"] = "queue"
    subprocess.run([THREADLINE, "migrate"], env=env, check=True, capture_output=True)
    created = subprocess.run(
        [THREADLINE, "orgs", "create", "Bench"], env=env, check=True, capture_output=True, text=True
    )
    key = re.search(r"(tl_\S+)", created.stdout).group(1)  # type: ignore[union-attr]
    env |= {"THREADLINE_LOG_LEVEL": "INFO", "THREADLINE_LOG_FORMAT": "text"}  # the lines that say "ready"
    ports = [free_port() for _ in range(apis)]
    with ExitStack() as stack:
        drains = stack.enter_context(ExitStack())  # closed last: the processes have stopped, their logs end
        named = os.environ.get("THREADLINE_BENCH_SERVER_LOG")
        log = Path(named) if named else Path(stack.enter_context(TemporaryDirectory())) / "deployment.log"
        started: list[tuple[str, subprocess.Popen[str], str]] = []
        for index, port in enumerate(ports):
            command = [*_PREFIX, THREADLINE, "serve", "--no-migrate", "--port", str(port)]
            started.append((f"api-{index}", stack.enter_context(_started(command, env)), API_READY))
        for index in range(workers):
            process = stack.enter_context(_started([THREADLINE, "worker"], env))
            started.append((f"worker-{index}", process, WORKER_READY))
        for name, process, ready in started:  # they start side by side
            _wait_ready(name, process, ready, log, drains)
        headers = {"Authorization": f"Bearer {key}"}
        yield Deployment(
            apis=[
                RunningServer(f"http://127.0.0.1:{port}", headers, process.pid)
                for port, (_, process, _) in zip(ports, started, strict=False)
            ],
            processes=[RunningProcess(name, process.pid) for name, process, _ in started],
            log=log,
        )


@contextmanager
def server(database_url: str, extra_env: dict[str, str] | None = None) -> Iterator[RunningServer]:
    """One `threadline serve` that executes its runs; yields its base URL and an admin auth header."""
    with deployment(database_url, 1, 0, extra_env) as running:
        yield running.apis[0]


@asynccontextmanager
async def one_server(backend: str, env: dict[str, str]) -> AsyncIterator[RunningServer]:
    """A fresh database and one server on it, set up and torn down off the event loop (they block)."""
    stack = ExitStack()
    try:
        url = await asyncio.to_thread(stack.enter_context, database(backend))
        yield await asyncio.to_thread(stack.enter_context, server(url, env))
    finally:
        await asyncio.to_thread(stack.close)


@asynccontextmanager
async def fake_model(latency_ms: float = 0.0) -> AsyncIterator[str]:
    """The fake model's base URL: each conversation calls MCP_TOOL once, then answers with text."""
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
            MCP_TOOL,
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
