"""The real MCP servers from tests/mcp_servers work with the Python SDK client: the set-up other tests use."""

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, types

from tests.mcp_servers import conformance, everything
from tests.mcp_servers.everything import EverythingHttpServer


@pytest.fixture
async def everything_http() -> AsyncIterator[EverythingHttpServer]:
    everything.require_everything()
    async with EverythingHttpServer() as server:
        yield server


class Notifications:
    """A `message_handler` that records server notifications and lets a test wait for one by method."""

    def __init__(self) -> None:
        self.methods: list[str] = []
        self._arrived: dict[str, anyio.Event] = {}

    async def __call__(self, message: types.ServerNotification | Exception) -> None:
        if not isinstance(message, Exception):
            self.methods.append(message.method)
            self._event(message.method).set()

    def _event(self, method: str) -> anyio.Event:
        return self._arrived.setdefault(method, anyio.Event())

    async def wait_for(self, method: str) -> None:
        """Return once a notification with `method` has arrived (callers bound the wait with fail_after)."""
        await self._event(method).wait()


async def test_server_everything_over_stdio() -> None:
    everything.require_everything()
    notifications = Notifications()
    async with Client(everything.stdio_parameters(), message_handler=notifications) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.server_info is not None and client.server_info.name == "mcp-servers/everything"
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"} <= names
        echoed = await client.call_tool("echo", {"message": "hello"})
        assert echoed.content == [types.TextContent(type="text", text="Echo: hello")]
        # It registers its capability-dependent tools once initialized, which announces a new tool list.
        with anyio.fail_after(10):
            await notifications.wait_for("notifications/tools/list_changed")


async def test_server_everything_over_streamable_http(everything_http: EverythingHttpServer) -> None:
    assert everything_http.url == f"http://127.0.0.1:{everything_http.port}/mcp"
    async with Client(everything_http.url) as client:
        assert client.protocol_version == "2025-11-25"
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"echo", "get-sum"} <= names
        summed = await client.call_tool("get-sum", {"a": 2, "b": 3})
        assert summed.content == [types.TextContent(type="text", text="The sum of 2 and 3 is 5.")]


async def test_notifications_reach_the_client_over_http(everything_http: EverythingHttpServer) -> None:
    notifications = Notifications()
    reported: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append((progress, total))

    async with Client(everything_http.url, message_handler=notifications) as client:
        # Progress travels on the tools/call response stream.
        done = await client.call_tool(
            "trigger-long-running-operation", {"duration": 0.2, "steps": 2}, progress_callback=on_progress
        )
        assert not done.is_error
        assert reported == [(1, 2), (2, 2)]
        # A new session resource (from a data: URI, no network) is announced on the GET SSE stream.
        data = "data:text/plain;base64," + base64.b64encode(b"hello").decode()
        await client.call_tool("gzip-file-as-resource", {"name": "hello.gz", "data": data})
        with anyio.fail_after(10):
            await notifications.wait_for("notifications/resources/list_changed")
        uris = {resource.uri for resource in (await client.list_resources(cache_mode="refresh")).resources}
        assert "demo://resource/session/hello.gz" in uris


async def test_http_server_is_killed_and_restarted_on_its_port(everything_http: EverythingHttpServer) -> None:
    url = everything_http.url
    await everything_http.akill()
    assert not everything_http.running
    assert await everything_http.astart() == url
    async with Client(url) as client:
        echoed = await client.call_tool("echo", {"message": "again"})
        assert echoed.content == [types.TextContent(type="text", text="Echo: again")]


async def test_conformance_suite_runs_against_a_server(everything_http: EverythingHttpServer, tmp_path: Path) -> None:
    conformance.require_conformance()
    run = await conformance.arun_server(everything_http.url, output_dir=tmp_path)
    active = set(conformance.SERVER_SCENARIOS) - set(conformance.PENDING_SCENARIOS)
    assert set(run.results) == active, run.output
    # server-everything implements what needs no fixture, except DNS-rebinding protection (no Host check).
    for name in set(conformance.FIXTURE_FREE_SCENARIOS) - {"dns-rebinding-protection"}:
        assert run.results[name].ok, (name, run.results[name].failures())
    # and none of the suite's own fixtures, so the scenarios that call them fail (a failure is read as one).
    assert run.results["tools-call-image"].failures() == ["tools-call-image: No image content found"]
    assert run.returncode == 1
