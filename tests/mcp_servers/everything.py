"""`@modelcontextprotocol/server-everything`, the MCP reference server, run with node.

Over stdio::

    async with mcp.Client(everything.stdio_parameters()) as client: ...

Over Streamable HTTP, as a subprocess on a free 127.0.0.1 port (`with` works too)::

    everything.require_everything()                       # in tests: skip without Node.js
    async with everything.EverythingHttpServer() as server:  # started; stopped on exit
        async with mcp.Client(server.url) as client: ...
        await server.akill()                              # SIGKILL, mid-call if you like
        await server.astart()                             # again, on the same port and URL

`dist/index.js <stdio|sse|streamableHttp>` selects the transport; the HTTP server takes its port
from the PORT environment variable, serves MCP at `/mcp` (stateful: sessions by `mcp-session-id`)
and prints `MCP Streamable HTTP Server listening on port <PORT>` (stderr), but that line comes even
when the port is taken (Express 5 calls the listen callback with the error). So `loopback.cjs`,
preloaded, binds it to 127.0.0.1 and prints `loopback.cjs: listening on 127.0.0.1:<PORT>` on the
real `listening` event, which is what `start()` waits for.
"""

from __future__ import annotations

import atexit
import collections
import os
import signal
import subprocess
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import anyio.to_thread
from mcp import StdioServerParameters

from tests.mcp_servers import HERE, node_executable, package_file, require_node_package
from tests.servers import free_port

PACKAGE = "@modelcontextprotocol/server-everything"
VERSION = "2026.8.31"
HOST = "127.0.0.1"
MCP_PATH = "/mcp"
SERVER_READY_LINE = "MCP Streamable HTTP Server listening on port"  # printed on failure too: not used
LOOPBACK_PRELOAD = HERE / "loopback.cjs"


def entry_file() -> Path:
    """`dist/index.js` of the installed package (raises `NotInstalledError`)."""
    return package_file(PACKAGE, "dist", "index.js")


def require_everything() -> Path:
    """For tests: the entry file, or skip (no Node.js) / fail (not installed) with a clear message."""
    return require_node_package(PACKAGE, "dist", "index.js")


# `gzip-file-as-resource` fetches its `data` URL (by default a file on the internet); tests pass
# `data:` URIs, and this keeps any http(s) fetch on this machine.
NO_NETWORK_ENV = {"GZIP_ALLOWED_DOMAINS": "127.0.0.1,localhost"}


def _base_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    # A small environment: the server's `get-env` tool returns all of it to any client.
    env = {"PATH": os.environ.get("PATH", os.defpath), "NODE_ENV": "test", **NO_NETWORK_ENV}
    env.update(extra or {})
    return env


def stdio_command() -> tuple[str, list[str]]:
    """(command, args) that run server-everything over stdio."""
    return node_executable(), [str(entry_file()), "stdio"]


def stdio_parameters(env: Mapping[str, str] | None = None) -> StdioServerParameters:
    """`mcp.StdioServerParameters` that run server-everything over stdio (the SDK adds its default env)."""
    command, args = stdio_command()
    return StdioServerParameters(command=command, args=args, env={**NO_NETWORK_ENV, **(env or {})})


class ServerStartError(RuntimeError):
    """server-everything exited or stayed silent instead of saying it listens."""


_live: weakref.WeakSet[EverythingHttpServer] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_live):
        server.kill()


class EverythingHttpServer:
    """server-everything over Streamable HTTP in a subprocess, on one port for its whole life.

    `start()` returns once the server listens (it reads the server's output; no polling) and raises
    `NotInstalledError` without node or the package (call `require_everything()` in a fixture first to
    skip/fail with a clear message). `stop()` ends it with SIGTERM, `kill()` with SIGKILL; `start()`
    again reuses the port, so clients and gateways keep the same URL across a crash. Output is drained
    continuously (the server logs every request); its last lines are kept in `output()` for diagnostics.
    Usable as a sync or async context manager (`async with` runs start/stop in a worker thread).
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 30.0,
        transport: str = "streamableHttp",
    ) -> None:
        self.port = port if port is not None else free_port()
        self.transport = transport
        """`streamableHttp`, or `sse` for the legacy HTTP+SSE transport (endpoint `/sse`)."""
        self.startup_timeout = startup_timeout
        self._extra_env = dict(env or {})
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._lines: collections.deque[str] = collections.deque(maxlen=200)
        self._lock = threading.Lock()
        _live.add(self)

    @property
    def url(self) -> str:
        """The Streamable HTTP endpoint, e.g. `http://127.0.0.1:40123/mcp`."""
        return f"http://{HOST}:{self.port}{'/sse' if self.transport == 'sse' else MCP_PATH}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def output(self) -> str:
        """The server's last output lines (stdout and stderr merged)."""
        with self._lock:
            return "\n".join(self._lines)

    def start(self) -> str:
        """Start the server and wait until it listens; returns `url`. Raises `ServerStartError`."""
        if self.running:
            raise RuntimeError(f"server-everything already runs on port {self.port}")
        self._lines.clear()
        env = _base_env(self._extra_env) | {"PORT": str(self.port)}
        command = [node_executable(), "--require", str(LOOPBACK_PRELOAD), str(entry_file()), self.transport]
        process = subprocess.Popen(
            command,
            cwd=HERE,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
        settled = threading.Event()
        state = {"ready": False}
        ready_line = f"loopback.cjs: listening on {HOST}:{self.port}"

        def drain() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                with self._lock:
                    self._lines.append(line.rstrip("\n"))
                if not state["ready"] and line.rstrip() == ready_line:
                    state["ready"] = True
                    settled.set()
            settled.set()  # end of output: the process is gone

        self._process = process
        self._reader = threading.Thread(target=drain, name=f"everything-{self.port}", daemon=True)
        self._reader.start()
        if not settled.wait(self.startup_timeout):
            self.kill()
            raise ServerStartError(
                f"server-everything did not listen on port {self.port} within {self.startup_timeout}s:\n{self.output()}"
            )
        if not state["ready"]:
            code = process.wait()
            self._reader.join()
            raise ServerStartError(f"server-everything exited with {code} before listening:\n{self.output()}")
        return self.url

    def _end(self, sig: signal.Signals, timeout: float) -> None:
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            try:
                process.send_signal(sig)
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._reader is not None:
            self._reader.join()
        if process.stdout is not None:
            process.stdout.close()

    def stop(self, timeout: float = 10.0) -> None:
        """End the server with SIGTERM (SIGKILL after `timeout`) and wait for it; no-op if not running."""
        self._end(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """End the server at once with SIGKILL, as a crash would; open connections are reset."""
        self._end(signal.SIGKILL, 10.0)

    def restart(self) -> str:
        """`stop()` then `start()` on the same port."""
        self.stop()
        return self.start()

    async def astart(self) -> str:
        return await anyio.to_thread.run_sync(self.start)

    async def astop(self) -> None:
        await anyio.to_thread.run_sync(self.stop)

    async def akill(self) -> None:
        await anyio.to_thread.run_sync(self.kill)

    def __enter__(self) -> EverythingHttpServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> EverythingHttpServer:
        await self.astart()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.astop()
