"""The MCP gateway against real servers: the SDK-built test server and server-everything (stdio, HTTP)."""

import asyncio
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import anyio
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from application.errors import McpAuthFailed, McpConnectionFailed, McpProtocolError, McpTimeout
from application.ports.mcp import McpTarget
from domain.ids import IntegrationId, OrgId
from domain.integrations import Transport
from infrastructure.mcp_client.connection import opened
from infrastructure.mcp_client.gateway import SdkMcpGateway
from infrastructure.mcp_client.operator_servers import OperatorServerRegistry
from infrastructure.outbound.guard import NetworkPolicy
from tests.fakes.loopback import LoopbackServer
from tests.fakes.mcp_server import FakeMcpServer
from tests.mcp_servers import everything


@pytest.fixture
async def gateway() -> AsyncIterator[SdkMcpGateway]:
    servers = OperatorServerRegistry({"everything": everything.stdio_parameters()}) if _has_everything() else None
    gateway = SdkMcpGateway(
        servers=servers or OperatorServerRegistry({}), outbound=NetworkPolicy(["127.0.0.0/8"]), max_sessions=4
    )
    yield gateway
    await gateway.close()


def _has_everything() -> bool:
    try:
        everything.entry_file()
        return True
    except Exception:
        return False


def http_target(url: str, **overrides: object) -> McpTarget:
    fields: dict = dict(
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


def stdio_children() -> list[int]:
    """Pids of the server-everything processes this test process started over stdio."""
    found = subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "stdio"], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


# -- the pool and the catalog cache ------------------------------------------------------------


async def test_one_session_serves_many_concurrent_calls(gateway: SdkMcpGateway) -> None:
    async with FakeMcpServer() as server:
        target = http_target(server.url)
        results = await asyncio.gather(*(gateway.call_tool(target, "add", {"a": i, "b": 1}) for i in range(20)))
        assert [r.parts[0].text for r in results] == [str(i + 1) for i in range(20)]
        await gateway.call_tool(target, "echo", {"message": "again"})
        assert server.methods["server/discover"] == 1  # connected once
        assert server.methods["tools/call"] == 21
        assert gateway.open_sessions == 1


async def test_catalogs_are_cached_and_dropped_when_the_server_announces_a_change(
    gateway: SdkMcpGateway,
) -> None:
    async with FakeMcpServer(page_size=2, list_ttl_ms=300_000) as server:
        target = http_target(server.url)
        changes = gateway.subscribe(target.integration_id)
        first = await gateway.list_tools(target)
        assert len(first) == 7 and server.list_tools_requests == 4  # four pages
        await gateway.list_tools(target)
        assert server.list_tools_requests == 4  # served from the cache

        await gateway.call_tool(target, "grow", {})
        with anyio.fail_after(10):
            assert await changes.get() == "tools"
        grown = await gateway.list_tools(target)
        assert [t.name for t in grown][-1] == "extra"
        assert server.list_tools_requests == 8


async def test_every_consumer_gets_every_change(gateway: SdkMcpGateway) -> None:
    async with FakeMcpServer(list_ttl_ms=300_000) as server:
        target = http_target(server.url)
        first, second = gateway.subscribe(target.integration_id), gateway.subscribe(target.integration_id)
        await gateway.call_tool(target, "grow", {})
        with anyio.fail_after(10):
            assert (await first.get(), await second.get()) == ("tools", "tools")


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
        assert gateway.open_sessions == 1


async def test_the_pool_is_bounded(gateway: SdkMcpGateway) -> None:
    async with FakeMcpServer() as server:
        targets = [http_target(server.url) for _ in range(6)]
        for target in targets:
            await gateway.call_tool(target, "echo", {})
        assert gateway.open_sessions == 4


# -- faults --------------------------------------------------------------------------------------


async def test_a_server_that_never_answers_times_out_and_the_pool_stays_healthy(
    gateway: SdkMcpGateway,
) -> None:
    async with FakeMcpServer() as server:
        target = http_target(server.url, timeout_seconds=1)
        with anyio.fail_after(5), pytest.raises(McpTimeout):
            await gateway.call_tool(target, "hang", {})
        assert (await gateway.call_tool(target, "echo", {"message": "still here"})).parts[0].text == "Echo: still here"


async def test_wrong_credentials_are_an_auth_error(gateway: SdkMcpGateway) -> None:
    async with FakeMcpServer(token="right") as server:
        target = http_target(server.url, headers={"Authorization": "Bearer wrong"})
        with pytest.raises(McpAuthFailed) as failure:
            await gateway.list_tools(target)
        assert "wrong" not in str(failure.value)
        good = http_target(server.url, headers={"Authorization": "Bearer right"})
        assert len(await gateway.list_tools(good)) == 7


async def test_a_server_that_answers_garbage_is_a_protocol_error() -> None:
    async def garbage(_request: object) -> PlainTextResponse:
        return PlainTextResponse("<html>definitely not MCP</html>")

    app = Starlette(routes=[Route("/mcp", garbage, methods=["GET", "POST", "DELETE"])])
    gateway = SdkMcpGateway(servers=OperatorServerRegistry({}), outbound=NetworkPolicy(["127.0.0.0/8"]))
    async with LoopbackServer(app) as server:
        try:
            with anyio.fail_after(15), pytest.raises((McpProtocolError, McpConnectionFailed)):
                await gateway.list_tools(http_target(f"{server.base_url}/mcp", timeout_seconds=5))
        finally:
            await gateway.close()


async def test_private_addresses_are_refused_unless_allowed() -> None:
    strict = SdkMcpGateway(servers=OperatorServerRegistry({}), outbound=NetworkPolicy([]))
    from application.errors import UrlNotAllowed

    with pytest.raises(UrlNotAllowed):
        await strict.list_tools(http_target("http://127.0.0.1:9/mcp"))
    await strict.close()


# -- server-everything over stdio ---------------------------------------------------------------


async def test_server_everything_over_stdio(gateway: SdkMcpGateway) -> None:
    target = stdio_target()
    changes = gateway.subscribe(target.integration_id)
    names = {t.name for t in await gateway.list_tools(target)}
    assert {"echo", "get-sum", "get-tiny-image"} <= names
    with anyio.fail_after(10):  # it announces its tool list once it is initialized
        assert await changes.get() == "tools"

    assert (await gateway.call_tool(target, "echo", {"message": "hi"})).parts[0].text == "Echo: hi"
    total = await gateway.call_tool(target, "get-sum", {"a": 2, "b": 3})
    assert total.parts[0].text == "The sum of 2 and 3 is 5."

    [text] = await gateway.read_resource(target, "demo://resource/static/document/architecture.md")
    assert text.text and text.mime_type == "text/markdown"
    [blob] = await gateway.read_resource(target, "demo://resource/dynamic/blob/1")
    assert blob.text is None and blob.blob

    prompt = await gateway.get_prompt(target, "args-prompt", {"city": "Paris", "state": "TX"})
    assert prompt.messages[0].content == "What's weather in Paris, TX?"
    assert "args-prompt" in {p.name for p in await gateway.list_prompts(target)}


async def test_a_resource_list_change_drops_the_cached_resources(gateway: SdkMcpGateway) -> None:
    target = stdio_target()
    before = {r.uri for r in await gateway.list_resources(target)}
    changes = gateway.subscribe(target.integration_id)
    await gateway.call_tool(
        target,
        "gzip-file-as-resource",
        {"name": "hello.gz", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resourceLink"},
    )
    with anyio.fail_after(10):
        while await changes.get() != "resources":
            pass
    after = {r.uri for r in await gateway.list_resources(target)}
    assert after - before == {"demo://resource/session/hello.gz"}


async def test_a_stdio_server_killed_between_calls_is_restarted_by_the_next_call(
    gateway: SdkMcpGateway,
) -> None:
    target = stdio_target()
    before = set(stdio_children())
    await gateway.call_tool(target, "echo", {"message": "one"})
    session = gateway.pool.get(target.integration_id)
    assert session is not None
    [pid] = set(stdio_children()) - before
    os.kill(pid, signal.SIGKILL)
    with anyio.fail_after(10):
        await session.lost.wait()  # the gateway noticed the server is gone
    result = await gateway.call_tool(target, "echo", {"message": "two"})
    assert result.parts[0].text == "Echo: two"
    assert set(stdio_children()) - before - {pid}  # a new server process


async def test_a_stdio_server_killed_during_a_call_is_a_typed_error_not_a_hang(
    gateway: SdkMcpGateway,
) -> None:
    target = stdio_target()
    before = set(stdio_children())
    connection = gateway.pool.new_connection(target, everything.stdio_parameters())
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()

    async with opened(connection):

        async def long_call(client):  # type: ignore[no-untyped-def]
            return await client.call_tool(
                "trigger-long-running-operation", {"duration": 30, "steps": 30}, progress_callback=on_progress
            )

        call = asyncio.create_task(connection.request(long_call, doing="calling a long tool"))
        with anyio.fail_after(10):
            await started.wait()
        for pid in set(stdio_children()) - before:
            os.kill(pid, signal.SIGKILL)
        with anyio.fail_after(10), pytest.raises(McpConnectionFailed):
            await call


# -- server-everything over Streamable HTTP --------------------------------------------------------


@pytest.fixture
async def everything_http() -> AsyncIterator[everything.EverythingHttpServer]:
    everything.require_everything()
    async with everything.EverythingHttpServer() as server:
        yield server


async def test_server_everything_over_streamable_http(
    gateway: SdkMcpGateway, everything_http: everything.EverythingHttpServer
) -> None:
    target = http_target(everything_http.url)
    assert {"echo", "get-sum"} <= {t.name for t in await gateway.list_tools(target)}
    assert (await gateway.call_tool(target, "echo", {"message": "hi"})).parts[0].text == "Echo: hi"
    total = await gateway.call_tool(target, "get-sum", {"a": 2, "b": 3})
    assert total.parts[0].text == "The sum of 2 and 3 is 5."
    [blob] = await gateway.read_resource(target, "demo://resource/dynamic/blob/2")
    assert blob.blob
    prompt = await gateway.get_prompt(target, "args-prompt", {"city": "Oslo"})
    assert prompt.messages[0].content.startswith("What's weather in Oslo")

    changes = gateway.subscribe(target.integration_id)
    await gateway.list_resources(target)
    await gateway.call_tool(
        target,
        "gzip-file-as-resource",
        {"name": "hi.gz", "data": "data:text/plain;base64,aGk=", "outputType": "resourceLink"},
    )
    with anyio.fail_after(10):
        while await changes.get() != "resources":
            pass
    assert "demo://resource/session/hi.gz" in {r.uri for r in await gateway.list_resources(target)}


async def test_an_http_server_restarted_between_calls_is_reconnected(
    gateway: SdkMcpGateway, everything_http: everything.EverythingHttpServer
) -> None:
    target = http_target(everything_http.url)
    assert (await gateway.call_tool(target, "echo", {"message": "before"})).parts[0].text == "Echo: before"
    await everything_http.akill()
    await everything_http.astart()
    assert (await gateway.call_tool(target, "echo", {"message": "after"})).parts[0].text == "Echo: after"


async def test_an_http_server_that_is_down_is_a_connection_error(
    gateway: SdkMcpGateway, everything_http: everything.EverythingHttpServer
) -> None:
    target = http_target(everything_http.url)
    await gateway.call_tool(target, "echo", {"message": "up"})
    await everything_http.akill()
    with anyio.fail_after(15), pytest.raises(McpConnectionFailed):
        await gateway.call_tool(target, "echo", {"message": "down"})
    await everything_http.astart()
    assert (await gateway.call_tool(target, "echo", {"message": "back"})).parts[0].text == "Echo: back"


async def test_an_http_server_killed_during_a_call_is_a_typed_error(
    gateway: SdkMcpGateway, everything_http: everything.EverythingHttpServer
) -> None:
    target = http_target(everything_http.url)
    connection = gateway.pool.new_connection(target, None)
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()

    async with opened(connection):

        async def long_call(client):  # type: ignore[no-untyped-def]
            return await client.call_tool(
                "trigger-long-running-operation", {"duration": 30, "steps": 30}, progress_callback=on_progress
            )

        call = asyncio.create_task(connection.request(long_call, doing="calling a long tool"))
        with anyio.fail_after(10):
            await started.wait()
        await everything_http.akill()
        with anyio.fail_after(15), pytest.raises(McpConnectionFailed):
            await call


async def test_a_legacy_sse_server_is_served_too(gateway: SdkMcpGateway) -> None:
    everything.require_everything()
    async with everything.EverythingHttpServer(transport="sse") as server:
        target = http_target(server.url, transport=Transport.SSE)
        assert "echo" in {t.name for t in await gateway.list_tools(target)}
        assert (await gateway.call_tool(target, "echo", {"message": "old"})).parts[0].text == "Echo: old"


async def test_an_idle_session_is_closed(gateway: SdkMcpGateway) -> None:
    idle = SdkMcpGateway(servers=OperatorServerRegistry({}), outbound=NetworkPolicy(["127.0.0.0/8"]), idle_seconds=0.2)
    async with FakeMcpServer() as server:
        target = http_target(server.url)
        await idle.call_tool(target, "echo", {})
        session = idle.pool.get(target.integration_id)
        assert session is not None
        with anyio.fail_after(10):
            await session.lost.wait()  # the pool closed it
        assert idle.open_sessions == 0
        assert (await idle.call_tool(target, "echo", {"message": "again"})).parts[0].text == "Echo: again"
    await idle.close()
