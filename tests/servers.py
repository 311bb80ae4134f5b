"""Real `threadline serve` processes for the tests that need one (kill -9, SIGTERM, fuzzing over HTTP), and a
free port on 127.0.0.1 for anything a test starts; the `threadline` command line for the set-up around them."""

import asyncio
import contextlib
import re
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

THREADLINE = str(Path(sys.executable).with_name("threadline"))
STARTED = "Uvicorn running on"


async def threadline(env: dict[str, str], *args: str) -> str:
    """A `threadline` command, which must succeed: what it printed."""
    process = await asyncio.create_subprocess_exec(
        THREADLINE, *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    assert process.returncode == 0, f"threadline {' '.join(args)} failed:\n{err.decode()}"
    return out.decode()


async def organization_headers(env: dict[str, str], name: str) -> dict[str, str]:
    """`threadline orgs create NAME`: the auth header of its first admin key."""
    key = re.search(r"(tl_\S+)", await threadline(env, "orgs", "create", name))
    assert key is not None
    return {"Authorization": f"Bearer {key.group(1)}"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def threadline_serve(
    env: dict[str, str], cwd: Path | None = None
) -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    """`threadline serve --no-migrate` on a free port, once it has started (recovery included): its base URL
    and process. Stopped afterwards unless the test killed it; the test fails with the log if it never starts."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        THREADLINE, "serve", "--no-migrate", "--port", str(port), env=env, cwd=cwd, stderr=asyncio.subprocess.PIPE
    )
    assert process.stderr is not None
    log: list[str] = []
    drain: asyncio.Task[bytes] | None = None

    async def started() -> None:
        assert process.stderr is not None
        while line := (await process.stderr.readline()).decode():
            log.append(line)
            if STARTED in line:
                return
        pytest.fail("threadline serve exited before it started:\n" + "".join(log))

    try:
        await asyncio.wait_for(started(), 60)
        drain = asyncio.create_task(process.stderr.read())  # the log must never fill its pipe
        yield f"http://127.0.0.1:{port}", process
    finally:
        if process.returncode is None:
            process.terminate()
            await asyncio.wait_for(process.wait(), 30)
        if drain is not None:
            await drain
