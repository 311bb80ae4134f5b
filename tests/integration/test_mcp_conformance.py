"""The official MCP conformance suite (`@modelcontextprotocol/conformance`) against Threadline's /mcp.

A real `threadline serve` process on a fresh SQLite database, with an organization, its API key and one
published agent, is tested with the suite's server scenarios that need none of the suite's own fixture
tools, resources or prompts (`conformance.FIXTURE_FREE_SCENARIOS`).

The suite's `server` command cannot send an Authorization header: it has only --url, --scenario, --suite,
--expected-failures, --output-dir, --spec-version and --verbose, reads no environment variable for headers,
its client is `new StreamableHTTPClientTransport(new URL(url))` without `requestInit`, and fetch refuses a
URL with credentials. So it talks to `AuthProxy`, a reverse proxy in this process that adds the key and
forwards everything else as it came, the client's Host and Origin included: Threadline's DNS rebinding
checks see what the suite sent, and its answers (status, headers, SSE streams) go back unchanged. One
exception: whitespace around a header value is dropped, as RFC 9110 5.5 has a recipient parse it, because
httpx cannot send it (Threadline's own handling of it is tested in tests/e2e/test_mcp_server_protocol.py).

The 2026-07-28 pre-release of the suite (`conformance.NEXT_PACKAGE`, 0.2.0-alpha.12) runs its 2026-07-28
server scenarios that can apply to a server publishing agents and templates
(`conformance.NEXT_FIXTURE_FREE_SCENARIOS`). Those that cannot apply, and why:

- tools-call-* (simple-text, image, audio, embedded-resource, mixed-content, error, with-progress),
  json-schema-2020-12, resources-read-text, resources-read-binary, resources-templates-read, prompts-get-*
  (simple, with-args, embedded-resource, with-image): they call the suite's own fixture tools, resources and
  prompts (`test_simple_text`, `test://static-text`, `test_simple_prompt`...), which a Threadline
  organization does not have (its tools are its agents and templates).
- http-custom-header-server-validation: it needs a tool whose input schema declares `x-mcp-header`
  parameters; published agents and templates declare none (every one of its checks is "Not testable").
- input-required-result-* but unsupported-methods (basic-elicitation, basic-sampling, basic-list-roots,
  request-state, multiple-input-requests, multi-round, missing-input-response, non-tool-request, result-type,
  tampered-state, capability-check, ignore-extra-params, validate-input): they call the suite's
  `test_input_required_result_*` tools and prompt.
- In server-stateless, four checks are "Not testable" and are not counted (`ScenarioResult.not_testable`):
  sep-2575-server-rejects-undeclared-capability and sep-2575-missing-capability-http-400 need the diagnostic
  tool `test_missing_capability`, sep-2575-http-server-no-independent-requests-on-stream needs
  `test_streaming_elicitation`, sep-2575-server-no-log-without-loglevel needs `test_logging_tool`.
- Extension scenarios (tasks-*, sep-2640-skills-*) are not part of the 2026-07-28 protocol.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import anyio
import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

from tests.fakes.loopback import LoopbackServer
from tests.mcp_servers import conformance
from tests.servers import free_port

THREADLINE = str(Path(sys.executable).with_name("threadline"))
TIME_LIMIT = 50.0

# Scenarios that fail because of what Threadline's MCP server does (see their reasons); the lead engineer
# removes a mark when the server is fixed (strict: a scenario that starts passing fails its test).
KNOWN_FAILURES: dict[str, str] = {}

# Hop-by-hop headers (RFC 9110 7.6.1) are the proxy's own business on each side; content-length is recomputed.
_HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding", b"upgrade"}


class AuthProxy:
    """An ASGI reverse proxy that sends every request on to `upstream` with `Authorization: Bearer <key>`.

    Everything else passes unchanged both ways: method, path, query, the client's headers (Host and Origin
    included), the body, the status, the response headers, and the response body as it arrives (SSE).
    When the client goes away, the upstream request is dropped too (a GET SSE stream never ends by itself).
    """

    def __init__(self, upstream: str, key: str) -> None:
        self._upstream = upstream
        self._authorization = f"Bearer {key}".encode()
        self._client = httpx.AsyncClient(timeout=None, trust_env=False)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = [
            (name, value.strip(b" \t"))
            for name, value in scope["headers"]
            if name not in _HOP_BY_HOP and name not in (b"authorization", b"content-length")
        ]
        headers.append((b"authorization", self._authorization))
        target = self._upstream + scope["raw_path"].decode("latin-1")
        if scope["query_string"]:
            target += "?" + scope["query_string"].decode("latin-1")
        request = self._client.build_request(scope["method"], target, headers=headers, content=bytes(body))
        async with anyio.create_task_group() as group:
            group.start_soon(self._cancel_on_disconnect, receive, group.cancel_scope)
            await self._forward(request, send)
            group.cancel_scope.cancel()

    async def _forward(self, request: httpx.Request, send: Send) -> None:
        response = await self._client.send(request, stream=True)
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [(n, v) for n, v in response.headers.raw if n.lower() not in _HOP_BY_HOP],
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()

    @staticmethod
    async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
        message: Message = {}
        while message.get("type") != "http.disconnect":
            message = await receive()
        scope.cancel()


@dataclass(frozen=True)
class Threadline:
    base_url: str
    key: str
    log: deque[str]
    """The server's last log lines, for a failure message."""


def _read_lines(stream: IO[str], into: deque[str]) -> None:
    for line in stream:
        into.append(line.rstrip())


@contextmanager
def threadline_server(directory: Path) -> Iterator[Threadline]:
    """`threadline serve` on a free port and a fresh SQLite database, with an organization and its admin key."""
    port = free_port()
    # Only this test's settings: none from the developer's environment or a .env file (cwd is `directory`).
    env = {name: value for name, value in os.environ.items() if not name.startswith("THREADLINE_")} | {
        "THREADLINE_DATABASE_URL": f"sqlite+aiosqlite:///{directory / 'threadline.db'}",
        "THREADLINE_SECRET_KEY": "conformance test secret key",
        "THREADLINE_DATA_DIR": str(directory / "data"),
        "THREADLINE_LOG_LEVEL": "INFO",
        "THREADLINE_LOG_FORMAT": "text",
    }
    server = subprocess.Popen(
        [THREADLINE, "serve", "--port", str(port)], env=env, cwd=directory, stderr=subprocess.PIPE, text=True
    )
    log: deque[str] = deque(maxlen=200)
    drain: threading.Thread | None = None
    try:
        assert server.stderr is not None
        for line in server.stderr:  # blocks until the server says it is up (or exits)
            log.append(line.rstrip())
            if "Uvicorn running on" in line:
                break
        else:
            pytest.fail("threadline serve exited before starting:\n" + "\n".join(log), pytrace=False)
        # Keep reading the server's log so it never blocks on a full pipe.
        drain = threading.Thread(target=_read_lines, args=(server.stderr, log), daemon=True)
        drain.start()
        created = subprocess.run(
            [THREADLINE, "orgs", "create", "Conformance"], env=env, cwd=directory, capture_output=True, text=True
        )
        assert created.returncode == 0, created.stderr
        found = re.search(r"(tl_\S+)", created.stdout)
        assert found is not None, created.stdout
        key = found.group(1)
        yield Threadline(f"http://127.0.0.1:{port}", key, log)
    finally:
        server.terminate()
        server.wait(timeout=30)
        if drain is not None:
            drain.join(timeout=30)


@dataclass(frozen=True, repr=False)
class SuiteRun:
    run: conformance.ConformanceRun
    log: list[str]
    scenarios: tuple[str, ...]

    def summary(self) -> str:
        lines = []
        for name in self.scenarios:
            result = self.run.results.get(name)
            if result is None:
                lines.append(f"{name}: no result")
                continue
            lines.append(f"{name}: {'passed' if result.ok else 'failed'} ({result.passed} checks passed)")
            lines += [f"    {failure}" for failure in result.failures()]
        problems = [line for line in self.log if " INFO " not in line]
        if problems:
            lines += ["", "Threadline's log, but INFO lines:", *problems[-40:]]
        return "\n".join(lines)


async def run_suite(tmp_path_factory: pytest.TempPathFactory, package: str, scenarios: tuple[str, ...]) -> SuiteRun:
    """Runs the scenarios of one version of the suite; the server and the proxy are gone when it returns."""
    conformance.require_conformance(package)
    directory = tmp_path_factory.mktemp("conformance")
    with threadline_server(directory) as threadline:
        auth = {"Authorization": f"Bearer {threadline.key}"}
        async with httpx.AsyncClient(base_url=threadline.base_url, headers=auth, trust_env=False) as http:
            # A published agent, so that tools/list has something to list.
            agent = {
                "name": "Echo",
                "description": "Answers offline",
                "model": "threadline-offline",
                "publish_as_mcp": True,
            }
            created = await http.post("/v1/agents", json=agent)
            assert created.status_code == 201, created.text
        proxy = AuthProxy(threadline.base_url, threadline.key)
        try:
            async with LoopbackServer(proxy, lifespan="off") as loopback:
                run = await conformance.arun_server(
                    f"{loopback.base_url}/mcp",
                    output_dir=directory / "results",
                    scenarios=scenarios,
                    time_limit=TIME_LIMIT,
                    package=package,
                )
        finally:
            await proxy.aclose()
        return SuiteRun(run, list(threadline.log), scenarios)


@pytest.fixture(scope="module")
async def suite(tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    """0.1.16's scenarios, run once for the module."""
    return await run_suite(tmp_path_factory, conformance.PACKAGE, conformance.FIXTURE_FREE_SCENARIOS)


@pytest.fixture(scope="module")
async def suite_2026(tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    """The 2026-07-28 pre-release's scenarios, run once for the module."""
    return await run_suite(tmp_path_factory, conformance.NEXT_PACKAGE, conformance.NEXT_FIXTURE_FREE_SCENARIOS)


def check_scenario(suite: SuiteRun, scenario: str) -> None:
    result = suite.run.results.get(scenario)
    assert result is not None, f"{scenario} wrote no checks.json\n{suite.run.output}"
    assert result.ok, f"{scenario} failed: {result.failures()}\n\nAll scenarios:\n{suite.summary()}"


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[name]))
        if name in KNOWN_FAILURES
        else name
        for name in conformance.FIXTURE_FREE_SCENARIOS
    ],
)
def test_conformance_scenario(suite: SuiteRun, scenario: str) -> None:
    check_scenario(suite, scenario)


@pytest.mark.parametrize("scenario", conformance.NEXT_FIXTURE_FREE_SCENARIOS)
def test_conformance_2026_07_28_scenario(suite_2026: SuiteRun, scenario: str) -> None:
    check_scenario(suite_2026, scenario)
