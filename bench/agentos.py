"""Agno AgentOS as a deployment bench.runs can measure beside Threadline (`--executors in_process,agno`): the same
run shape, fake model and MCP server, on a fresh SQLite or PostgreSQL database.

Agno is installed on demand into a venv of its own, bench/.agno-venv (created the first time, from the package
index pip is configured with; never a dependency of Threadline or of its tests). A run is
POST /agents/bench/runs (form fields message, stream=true and a new session_id) read to its RunCompleted event.
"""

import asyncio
import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx
from sqlalchemy.engine import make_url

from bench._server import RunningProcess, cpu_seconds, database, peak_memory_mb

AGNO = "agno==3.1.10"
# fastmcp: Agno's MCPTools connects with it (without it the agent has no MCP tools, and says so only in its log).
REQUIREMENTS = [AGNO, "fastmcp>=4,<5", "fastapi", "uvicorn", "openai", "sqlalchemy[asyncio]", "psycopg[binary]"]
ECHOED = "Echo: hi"
"""What the MCP server's echo tool answers to the fake model's call: in the run's answer only if the tool ran."""
VENV = Path(__file__).with_name(".agno-venv")
APP = Path(__file__).with_name("agno_app.py")
AGENT_ID = "bench"
READY_SECONDS = 120


def agno_python() -> Path:
    """The venv's interpreter, with Agno installed (made the first time)."""
    python = VENV / "bin" / "python"
    marker = VENV / "installed.txt"
    if python.exists() and marker.exists() and marker.read_text() == " ".join(REQUIREMENTS):
        return python
    print(f"installing {AGNO} into {VENV} (once)", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *REQUIREMENTS], check=True)
    marker.write_text(" ".join(REQUIREMENTS))
    return python


@dataclass(frozen=True)
class AgnoDeployment:
    base_url: str
    processes: list[RunningProcess]

    def peak_memory_mb(self) -> dict[str, float]:
        return {p.name: peak_memory_mb(p.pid) for p in self.processes}

    def cpu_seconds(self) -> dict[str, float]:
        return {p.name: cpu_seconds(p.pid) for p in self.processes}


@contextmanager
def _agno_database(backend: str) -> Iterator[str]:
    if backend == "sqlite":
        with TemporaryDirectory() as directory:
            yield str(Path(directory) / "agno.db")
        return
    with database(backend) as url:  # a fresh PostgreSQL database; Agno's PostgresDb speaks psycopg
        yield make_url(url).set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def _agno_os(backend: str, model_url: str, mcp_url: str) -> Iterator[AgnoDeployment]:
    python = agno_python()
    with ExitStack() as stack:
        db = stack.enter_context(_agno_database(backend))
        port = _free_port()
        env = {
            "PATH": "/usr/bin:/bin",
            "AGNO_TELEMETRY": "false",
            "BENCH_AGNO_PORT": str(port),
            "BENCH_AGNO_DB": db,
            "BENCH_MODEL_URL": model_url,
            "BENCH_MCP_URL": mcp_url,
        }
        process = subprocess.Popen([str(python), "-P", str(APP)], env=env)  # -P: bench/ is not on its path
        stack.callback(process.wait, 30)
        stack.callback(process.terminate)
        base_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + READY_SECONDS
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"Agno AgentOS exited with {process.returncode} before it was ready")
            try:
                if httpx.get(f"{base_url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("Agno AgentOS was not ready in time")
            time.sleep(0.2)  # a process starting up: nothing to wait on but its port
        yield AgnoDeployment(base_url, [RunningProcess("agno", process.pid)])


@asynccontextmanager
async def agno_os(backend: str, model_url: str, mcp_url: str) -> AsyncIterator[AgnoDeployment]:
    """Agno AgentOS on a fresh database, started and stopped off the event loop (they block)."""
    stack = ExitStack()
    try:
        yield await asyncio.to_thread(stack.enter_context, _agno_os(backend, model_url, mcp_url))
    finally:
        await asyncio.to_thread(stack.close)


def client(deployment: AgnoDeployment) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=2_000, max_keepalive_connections=2_000)
    return httpx.AsyncClient(base_url=deployment.base_url, timeout=600, limits=limits)


def _error_text(data: str) -> str:
    """What a RunError event says went wrong, shortened (the outcomes count runs by it)."""
    try:
        content = json.loads(data).get("content")
    except (ValueError, AttributeError):
        content = None
    return str(content or data)[:80]


async def one_agno_run(http: httpx.AsyncClient, limit_seconds: float) -> tuple[float, str]:
    """How long one run took (a new session), and how it ended: completed (the MCP tool's answer in the run's
    answer), `tool not called`, `error: <what its RunError event says>`, `http <status>` or timeout."""
    began = time.perf_counter()
    status = "failed"
    form = {"message": "please echo", "stream": "true", "session_id": str(uuid.uuid4())}
    try:
        async with asyncio.timeout(limit_seconds):
            async with http.stream("POST", f"/agents/{AGENT_ID}/runs", data=form) as events:
                if events.status_code != 200:
                    return time.perf_counter() - began, f"http {events.status_code}"
                event = ""
                async for line in events.aiter_lines():
                    if line.startswith("event: "):
                        event = line.removeprefix("event: ")
                    elif event == "RunCompleted" and line.startswith("data: "):
                        status = "completed" if ECHOED in line else "tool not called"
                    elif event == "RunError" and line.startswith("data: "):
                        status = f"error: {_error_text(line.removeprefix('data: '))}"
    except TimeoutError:
        status = "timeout"
    return time.perf_counter() - began, status
