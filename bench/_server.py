"""Start a real `threadline serve` process on a fresh database for a benchmark."""

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

from tests.databases import postgres_database

THREADLINE = str(Path(sys.executable).with_name("threadline"))
# e.g. "python -m cProfile -o server.prof": runs the server under a profiler.
_PREFIX = os.environ.get("THREADLINE_BENCH_SERVER_PREFIX", "").split()
POSTGRES_SERVER = os.environ.get(
    "THREADLINE_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)


@contextmanager
def database(backend: str) -> Iterator[str]:
    if backend == "sqlite":
        with TemporaryDirectory() as directory:
            yield f"sqlite+aiosqlite:///{directory}/bench.db"
        return
    with postgres_database(POSTGRES_SERVER, "threadline_bench") as url:
        yield url


@dataclass(frozen=True)
class RunningServer:
    base_url: str
    headers: dict[str, str]
    """An admin key's auth header, for a new organization."""
    pid: int

    def peak_memory_mb(self) -> float:
        """The process's peak resident memory so far (Linux)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")


@contextmanager
def server(database_url: str, extra_env: dict[str, str] | None = None) -> Iterator[RunningServer]:
    """Yields the base URL and an admin auth header of a new organization."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = os.environ | {"THREADLINE_DATABASE_URL": database_url, "THREADLINE_LOG_LEVEL": "WARNING"} | (extra_env or {})
    subprocess.run([THREADLINE, "migrate"], env=env, check=True, capture_output=True)
    created = subprocess.run(
        [THREADLINE, "orgs", "create", "Bench"], env=env, check=True, capture_output=True, text=True
    )
    key = re.search(r"(tl_\S+)", created.stdout).group(1)  # type: ignore[union-attr]
    process = subprocess.Popen(
        [*_PREFIX, THREADLINE, "serve", "--no-migrate", "--port", str(port)],
        env=env | {"THREADLINE_LOG_LEVEL": "INFO", "THREADLINE_LOG_FORMAT": "text"},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "Application startup complete" in line:
                break
        else:
            raise RuntimeError("server did not start")
        # Keep draining the server's log so it never blocks on a full pipe.
        log = os.environ.get("THREADLINE_BENCH_SERVER_LOG")
        sink = open(log, "a") if log else subprocess.DEVNULL  # noqa: SIM115 - closed with the process below
        drain = subprocess.Popen(["cat"], stdin=process.stderr, stdout=sink)
        yield RunningServer(f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {key}"}, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)
        drain.wait(timeout=30)
