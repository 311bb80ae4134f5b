"""The MCP gateway against real servers: the SDK-built test server and server-everything (stdio, HTTP)."""

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypeVar
from uuid import uuid4

import anyio
import anyio.lowlevel
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from application.errors import McpAuthFailed, McpConnectionFailed, McpProtocolError, McpTimeout, UrlNotAllowed
from application.ports.mcp import McpAnswer, McpCallHooks, McpInputRequired, McpTarget, McpToolResult
from domain.ids import IntegrationId, OrgId
from domain.integrations import Transport
from infrastructure.mcp_client import connection
from infrastructure.mcp_client.connection import McpConnection, _FinishedStream, _ReusedConnections, opened
from infrastructure.mcp_client.gateway import SdkMcpGateway
from infrastructure.mcp_client.operator_servers import OperatorServerRegistry
from infrastructure.mcp_client.pool import McpSessionPool
from infrastructure.outbound.guard import NetworkPolicy
from tests.fakes.loopback import LoopbackServer
from tests.fakes.mcp_server import FakeMcpServer
from tests.mcp_servers import everything

T = TypeVar("T")
LOOPBACK = NetworkPolicy(["127.0.0.0/8"])


@pytest.fixture
async def gateway() -> AsyncIterator[SdkMcpGateway]:
    servers = OperatorServerRegistry({"everything": everything.stdio_parameters()} if _has_everything() else {})
    gateway = SdkMcpGateway(servers=servers, outbound=LOOPBACK, max_sessions=4)
    yield gateway
    await gateway.close()


def _has_everything() -> bool:
    try:
        everything.entry_file()
        return True
    except Exception:
        return False


def http_target(url: str, **overrides: Any) -> McpTarget:
    fields: dict[str, Any] = dict(
        integration_id=IntegrationId(uuid4()),
        org_id=OrgId(uuid4()),
        transport=Transport.STREAMABLE_HTTP,
        version=datetime.now(UTC),
        url=url,
        timeout_seconds=10,
    )
    return McpTarget(**(fields | overrides))


def stdio_target() -> McpTarget:
    everything.require_everything()
    return McpTarget(
        integration_id=IntegrationId(uuid4()),
        org_id=OrgId(uuid4()),
        transport=Transport.STDIO,
        version=datetime.now(UTC),
        server="everything",
        timeout_seconds=20,
    )


def stdio_children() -> set[int]:
    """Pids of the server-everything processes this test process started over stdio."""
    found = subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "stdio"], capture_output=True, text=True)
    return {int(pid) for pid in found.stdout.split()}


async def until_listed(
    list_catalog: Callable[[], Awaitable[Sequence[T]]], wanted: Callable[[Sequence[T]], bool]
) -> Sequence[T]:
    """Lists until the gateway serves a list `wanted` accepts. A list the gateway cached changes before
    its TTL only once the server announced the change, so this fails when the announcement is lost."""
    with anyio.fail_after(10):
        while not wanted(found := await list_catalog()):
            await anyio.lowlevel.checkpoint()  # the announcement comes in on another task
    return found


def text_of(result: McpToolResult | McpInputRequired) -> str | None:
    assert isinstance(result, McpToolResult), result
    return result.parts[0].text


# -- the pool and the catalog cache ------------------------------------------------------------


async def test_one_session_serves_many_concurrent_calls(gateway: SdkMcpGateway) -> None:
    async with FakeMcpServer() as server:
        target = http_target(server.url)
        results = await asyncio.gather(*(gateway.call_tool(target, "add", {"a": i, "b": 1}) for i in range(20)))
        assert [text_of(r) for r in results] == [str(i + 1) for i in range(20)]
        await gateway.call_tool(target, "echo", {"message": "again"})
        assert server.methods["server/discover"] == 1  # connected once
        assert server.methods["tools/call"] == 21
        assert server.listening == 1  # and that one session is open


async def test_catalogs_are_cached(gateway: SdkMcpGateway) -> None:
    async with FakeMcpServer(page_size=2, list_ttl_ms=300_000) as server:
        target = http_target(server.url)
        first = await gateway.list_tools(target)
        assert len(first) == 8 and server.list_tools_requests == 4  # four pages
        assert await gateway.list_tools(target) == first
        assert server.list_tools_requests == 4  # served from the cache


async def test_a_known_catalog_is_given_whole_without_asking_the_server_or_waiting(gateway: SdkMcpGateway) -> None:
    async with FakeMcpServer(page_size=2, list_ttl_ms=300_000) as server:
        target = http_target(server.url)
        first = await gateway.catalog(target)
        assert len(first.tools) == 8 and server.list_tools_requests == 4
        asked = dict(server.methods)
        again = gateway.catalog(target)
        with pytest.raises(StopIteration) as given:  # done in one step: nothing awaited (a run's tools are so)
            again.send(None)
        assert given.value.value == first and dict(server.methods) == asked


async def test_a_cached_catalog_is_dropped_when_the_server_announces_a_change(gateway: SdkMcpGateway) -> None:
    async with FakeMcpServer(page_size=2, list_ttl_ms=300_000) as server:
        target = http_target(server.url)
        await gateway.list_tools(target)
        await gateway.call_tool(target, "grow", {})
        grown = await until_listed(lambda: gateway.list_tools(target), lambda tools: len(tools) == 9)
        assert [t.name for t in grown][-1] == "extra"
        assert server.list_tools_requests == 9  # four pages, then the five pages once, once


async def test_a_server_that_asks_for_no_caching_is_asked_every_time(gateway: SdkMcpGateway) -> None:
    async with FakeMcpServer(page_size=10, list_ttl_ms=0) as server:
        target = http_target(server.url)
        await gateway.list_tools(target)
        await gateway.list_tools(target)
        assert server.list_tools_requests == 2


async def test_a_changed_integration_gets_a_new_session(gateway: SdkMcpGateway) -> None:
    async with FakeMcpServer() as server:
        target = http_target(server.url)
        await gateway.call_tool(target, "echo", {})
        updated = replace(target, version=target.version + timedelta(seconds=1))
        await gateway.call_tool(updated, "echo", {})
        assert server.methods["server/discover"] == 2
        with anyio.fail_after(10):
            await server.wait_listening(1)  # the old session was closed


async def test_the_pool_is_bounded(gateway: SdkMcpGateway) -> None:
    async with FakeMcpServer() as server:
        targets = [http_target(server.url) for _ in range(6)]
        for target in targets:
            await gateway.call_tool(target, "echo", {})
        with anyio.fail_after(10):
            await server.wait_listening(4)  # the two used longest ago were closed
        for target in targets[2:]:
            await gateway.call_tool(target, "echo", {})
        assert server.methods["server/discover"] == 6  # the last four are the open ones
        await gateway.call_tool(targets[0], "echo", {})
        assert server.methods["server/discover"] == 7


async def test_an_idle_session_is_closed() -> None:
    idle = SdkMcpGateway(servers=OperatorServerRegistry({}), outbound=LOOPBACK, idle_seconds=0.2)
    async with FakeMcpServer() as server:
        target = http_target(server.url)
        await idle.call_tool(target, "echo", {})
        assert server.listening == 1
        with anyio.fail_after(10):
            await server.wait_listening(0)  # the pool closed it
        assert text_of(await idle.call_tool(target, "echo", {"message": "again"})) == "Echo: again"
        assert server.methods["server/discover"] == 2
    await idle.close()


# -- faults --------------------------------------------------------------------------------------


async def test_a_server_that_never_answers_times_out_and_the_pool_stays_healthy(
    gateway: SdkMcpGateway,
) -> None:
    async with FakeMcpServer() as server:
        target = http_target(server.url, timeout_seconds=1)
        with anyio.fail_after(5), pytest.raises(McpTimeout):
            await gateway.call_tool(target, "hang", {})
        assert text_of(await gateway.call_tool(target, "echo", {"message": "still here"})) == "Echo: still here"


async def test_wrong_credentials_are_an_auth_error(gateway: SdkMcpGateway) -> None:
    async with FakeMcpServer(token="right") as server:
        target = http_target(server.url, headers={"Authorization": "Bearer wrong"})
        with pytest.raises(McpAuthFailed) as failure:
            await gateway.list_tools(target)
        assert "wrong" not in str(failure.value)
        good = http_target(server.url, headers={"Authorization": "Bearer right"})
        assert len(await gateway.list_tools(good)) == 8


async def test_a_server_that_answers_garbage_is_a_protocol_error() -> None:
    async def garbage(_request: object) -> PlainTextResponse:
        return PlainTextResponse("<html>definitely not MCP</html>")

    app = Starlette(routes=[Route("/mcp", garbage, methods=["GET", "POST", "DELETE"])])
    gateway = SdkMcpGateway(servers=OperatorServerRegistry({}), outbound=LOOPBACK)
    async with LoopbackServer(app) as server:
        try:
            with anyio.fail_after(15), pytest.raises((McpProtocolError, McpConnectionFailed)):
                await gateway.list_tools(http_target(f"{server.base_url}/mcp", timeout_seconds=5))
        finally:
            await gateway.close()


async def test_private_addresses_are_refused_unless_allowed() -> None:
    strict = SdkMcpGateway(servers=OperatorServerRegistry({}), outbound=NetworkPolicy([]))
    with pytest.raises(UrlNotAllowed):
        await strict.list_tools(http_target("http://127.0.0.1:9/mcp"))
    await strict.close()


# -- server-everything, over stdio and over Streamable HTTP ---------------------------------------


@dataclass
class Everything:
    """server-everything on one transport, and how to kill the process serving it."""

    target: McpTarget
    stdio: StdioServerParameters | None
    kill: Callable[[], Awaitable[None]]


@pytest.fixture(params=[Transport.STDIO, Transport.STREAMABLE_HTTP], ids=["stdio", "streamable_http"])
async def everything_server(request: pytest.FixtureRequest) -> AsyncIterator[Everything]:
    everything.require_everything()
    if request.param is Transport.STDIO:
        before = stdio_children()

        async def kill() -> None:
            for pid in stdio_children() - before:
                os.kill(pid, signal.SIGKILL)

        yield Everything(stdio_target(), everything.stdio_parameters(), kill)
    else:
        async with everything.EverythingHttpServer() as server:
            yield Everything(http_target(server.url), None, server.akill)


async def test_server_everything_tools_are_listed_and_called(
    gateway: SdkMcpGateway, everything_server: Everything
) -> None:
    target = everything_server.target
    listed = {t.name: t for t in await gateway.list_tools(target)}
    assert {"echo", "get-sum", "get-tiny-image"} <= set(listed)
    # as the server marks them (readOnlyHint): echo only reads, toggling its logging changes the session
    assert listed["echo"].read_only and not listed["toggle-simulated-logging"].read_only
    assert text_of(await gateway.call_tool(target, "echo", {"message": "hi"})) == "Echo: hi"
    total = await gateway.call_tool(target, "get-sum", {"a": 2, "b": 3})
    assert text_of(total) == "The sum of 2 and 3 is 5."


async def test_server_everything_resources_are_read_as_text_and_blobs(
    gateway: SdkMcpGateway, everything_server: Everything
) -> None:
    target = everything_server.target
    [text] = await gateway.read_resource(target, "demo://resource/static/document/architecture.md")
    assert text.text and text.mime_type == "text/markdown"
    [blob] = await gateway.read_resource(target, "demo://resource/dynamic/blob/1")
    assert blob.text is None and blob.blob


async def test_server_everything_prompts_are_listed_and_rendered(
    gateway: SdkMcpGateway, everything_server: Everything
) -> None:
    target = everything_server.target
    assert "args-prompt" in {p.name for p in await gateway.list_prompts(target)}
    prompt = await gateway.get_prompt(target, "args-prompt", {"city": "Paris", "state": "TX"})
    assert prompt.messages[0].content == "What's weather in Paris, TX?"


async def test_a_resource_list_change_drops_the_cached_resources(
    gateway: SdkMcpGateway, everything_server: Everything
) -> None:
    target = everything_server.target
    before = {r.uri for r in await gateway.list_resources(target)}
    await gateway.call_tool(
        target,
        "gzip-file-as-resource",
        {"name": "hello.gz", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resourceLink"},
    )
    after = await until_listed(lambda: gateway.list_resources(target), lambda found: len(found) > len(before))
    assert {r.uri for r in after} - before == {"demo://resource/session/hello.gz"}


async def test_a_server_killed_during_a_call_is_a_typed_error_not_a_hang(everything_server: Everything) -> None:
    connection = McpConnection(everything_server.target, everything_server.stdio, LOOPBACK, lambda kind: None)
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()

    async def long_call(client: Client) -> types.CallToolResult:
        return await client.call_tool(
            "trigger-long-running-operation", {"duration": 30, "steps": 30}, progress_callback=on_progress
        )

    async with opened(connection):
        call = asyncio.create_task(connection.request(long_call, doing="calling a long tool"))
        with anyio.fail_after(10):
            await started.wait()
        await everything_server.kill()
        with anyio.fail_after(15), pytest.raises(McpConnectionFailed):
            await call


async def test_a_stdio_server_killed_between_calls_is_restarted_by_the_next_call() -> None:
    """The gateway's calls take their session from the pool: once a session notices its server is gone,
    the pool starts a new server for the next call."""
    target, parameters = stdio_target(), everything.stdio_parameters()
    pool = McpSessionPool(max_sessions=4, idle_seconds=300, on_change=lambda *_: None, outbound=LOOPBACK)
    before = stdio_children()
    try:
        session = await pool.session(target, parameters)
        [pid] = stdio_children() - before
        os.kill(pid, signal.SIGKILL)
        with anyio.fail_after(10):
            await session.lost.wait()  # the session noticed the server is gone
        again = await pool.session(target, parameters)
        result = await again.request(lambda client: client.call_tool("echo", {"message": "two"}), doing="calling")
        assert isinstance(result.content[0], types.TextContent) and result.content[0].text == "Echo: two"
        assert stdio_children() - before - {pid}  # a new server process
    finally:
        await pool.close()


# -- server-everything over Streamable HTTP and SSE -------------------------------------------------


@pytest.fixture
async def everything_http() -> AsyncIterator[everything.EverythingHttpServer]:
    everything.require_everything()
    async with everything.EverythingHttpServer() as server:
        yield server


@contextlib.asynccontextmanager
async def counted_connections(port: int) -> AsyncIterator[tuple[int, list[int]]]:
    """A TCP relay on 127.0.0.1 to `port`: its own port, and a list that grows by one per connection it takes."""
    taken: list[int] = []

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65_536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        taken.append(1)
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1], taken


async def test_calls_one_after_another_share_one_connection(
    gateway: SdkMcpGateway, everything_http: everything.EverythingHttpServer
) -> None:
    """server-everything answers a call with an event stream, which the SDK closes once the response is in it:
    the connection is kept all the same, not one opened per call (a handshake, and a socket in TIME_WAIT)."""
    async with counted_connections(everything_http.port) as (port, taken):
        target = http_target(f"http://127.0.0.1:{port}/mcp")
        await gateway.call_tool(target, "echo", {"message": "first"})
        before = len(taken)
        for i in range(5):
            assert text_of(await gateway.call_tool(target, "echo", {"message": str(i)})) == f"Echo: {i}"
        assert len(taken) == before
        await gateway.close()  # its session ends while the relay is still there


class _Body(httpx2.AsyncByteStream):
    """A response body of two parts that counts how often it is read from the start."""

    def __init__(self) -> None:
        self.reads = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self.reads += 1
        yield b"event: message\n"
        yield b"data: {}\n\n"


async def test_an_event_stream_is_read_past_the_response_only_when_it_was_left_before_its_end() -> None:
    """Closed before its end (the SDK stops at the response), the rest is read, so the connection is kept; read
    to its end (no response came in it), it is closed as it is: reading on would wait for what never comes, or,
    on a connection the server closes, never stop."""
    left, ended = _Body(), _Body()
    left_early = _FinishedStream(left)
    async for _ in left_early:
        break
    await left_early.aclose()
    assert left.reads == 2  # the rest of it, read on close
    read_through = _FinishedStream(ended)
    assert [part async for part in read_through] == [b"event: message\n", b"data: {}\n\n"]
    await read_through.aclose()
    assert ended.reads == 1


class _Endless(httpx2.AsyncByteStream):
    """A response body that never ends (a server that keeps streaming after the response), or that is cut after its
    first part; it counts what is read of it and whether it was closed."""

    def __init__(self, *, cut: bool = False) -> None:
        self.read, self.closed, self._cut = 0, False, cut

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            part = b"data: " + b"x" * 4_090 + b"\n\n"
            self.read += len(part)
            yield part
            if self._cut:
                raise httpx2.ReadError("the connection was reset")

    async def aclose(self) -> None:
        self.closed = True


async def test_what_is_left_of_an_event_stream_is_read_up_to_a_bound_and_a_cut_one_is_closed_quietly() -> None:
    """A server that goes on streaming after the response does not hold the call: at most _DRAIN_BYTES more are read
    before the stream (and its connection) is closed; one cut while it is read is closed without an error."""
    endless = _Endless()
    stream = _FinishedStream(endless)
    async for _ in stream:
        break
    await stream.aclose()
    assert endless.closed
    assert connection._DRAIN_BYTES < endless.read <= connection._DRAIN_BYTES + 2 * 4_096
    cut = _Endless(cut=True)
    stream = _FinishedStream(cut)
    async for _ in stream:
        break
    await stream.aclose()  # the reset is not the caller's concern: the response it waited for is in
    assert cut.closed


@pytest.mark.timeout(30)  # reading past such a stream's end never stopped: the process spun
async def test_an_event_stream_read_to_its_end_on_a_connection_the_server_closes_ends_the_request() -> None:
    """A POST's event stream without the response the SDK waits for is read to its end; on a connection the server
    closes after it, the request ends there, and the next one goes on a new connection."""
    event = b'event: message\ndata: {"jsonrpc": "2.0", "method": "notifications/message"}\n\n'
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\ntransfer-encoding: chunked"

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        length = next(int(h.split(b":")[1]) for h in request.split(b"\r\n") if h.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        writer.write(head + b"\r\n\r\n" + b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, httpx2.AsyncClient(transport=_ReusedConnections(httpx2.AsyncHTTPTransport())) as client:
        for _ in range(2):
            async with client.stream("POST", f"http://127.0.0.1:{port}/mcp", json={}) as response:
                assert [line async for line in response.aiter_lines() if line.startswith("data:")]


async def test_an_http_server_restarted_between_calls_is_reconnected(
    gateway: SdkMcpGateway, everything_http: everything.EverythingHttpServer
) -> None:
    target = http_target(everything_http.url)
    assert text_of(await gateway.call_tool(target, "echo", {"message": "before"})) == "Echo: before"
    await everything_http.akill()
    await everything_http.astart()
    assert text_of(await gateway.call_tool(target, "echo", {"message": "after"})) == "Echo: after"


async def test_an_http_server_that_is_down_is_a_connection_error(
    gateway: SdkMcpGateway, everything_http: everything.EverythingHttpServer
) -> None:
    target = http_target(everything_http.url)
    await gateway.call_tool(target, "echo", {"message": "up"})
    await everything_http.akill()
    with anyio.fail_after(15), pytest.raises(McpConnectionFailed):
        await gateway.call_tool(target, "echo", {"message": "down"})
    await everything_http.astart()
    assert text_of(await gateway.call_tool(target, "echo", {"message": "back"})) == "Echo: back"


async def test_a_legacy_sse_server_is_served_too(gateway: SdkMcpGateway) -> None:
    everything.require_everything()
    async with everything.EverythingHttpServer(transport="sse") as server:
        target = http_target(server.url, transport=Transport.SSE)
        assert "echo" in {t.name for t in await gateway.list_tools(target)}
        assert text_of(await gateway.call_tool(target, "echo", {"message": "old"})) == "Echo: old"


# -- questions for the user (elicitation, 2026-07-28) --------------------------------------------------


class Party(BaseModel):
    guests: int


async def _ask_party(restaurant: str) -> Elicit[Party]:
    return Elicit(f"How many guests at {restaurant}?", Party)


def _tables() -> MCPServer:
    server = MCPServer("tables")

    @server.tool()
    async def book(restaurant: str, party: Annotated[Party, Resolve(_ask_party)]) -> str:
        """Books a table, asking the user how many guests."""
        return f"Table for {party.guests} at {restaurant}"

    return server


async def test_a_server_that_asks_through_the_sdks_resolvers_gets_the_answers_with_its_state(
    gateway: SdkMcpGateway,
) -> None:
    async with LoopbackServer(_tables().streamable_http_app()) as served:
        target = http_target(f"{served.base_url}/mcp")
        assert [t.name for t in await gateway.list_tools(target)] == ["book"]

        asked = await gateway.call_tool(target, "book", {"restaurant": "Ada's"})

        assert isinstance(asked, McpInputRequired)
        [question] = asked.questions
        assert question.message == "How many guests at Ada's?"
        assert question.requested_schema["required"] == ["guests"]
        answer = {question.key: McpAnswer(action="accept", content={"guests": 3})}
        done = await gateway.call_tool(
            target, "book", {"restaurant": "Ada's"}, McpCallHooks(answers=answer, request_state=asked.request_state)
        )
        assert text_of(done) == "Table for 3 at Ada's"
        declined = await gateway.call_tool(
            target,
            "book",
            {"restaurant": "Ada's"},
            McpCallHooks(answers={question.key: McpAnswer(action="decline")}, request_state=asked.request_state),
        )
        assert isinstance(declined, McpToolResult) and declined.is_error
        assert text_of(declined) == (
            "Error executing tool book: Resolver for parameter 'party' could not resolve: elicitation was decline"
        )
        await gateway.forget(target.integration_id)  # its session ends before the server stops
