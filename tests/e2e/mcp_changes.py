"""MCP clients of both protocol generations, told when an organization's tools and prompts change: a
handshake-era client (2025-11-25, notifications on its GET stream) and a 2026-07-28 client (a
`subscriptions/listen` stream)."""

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.subscriptions import Subscription

from tests.conftest import Tenant
from tests.e2e.test_mcp_server import mcp_client

TOLD_WITHIN = 10.0
"""Seconds a test waits for a notification (the server sends it at once; the bound only keeps a failure short)."""


class Notifications:
    """A `message_handler` for a handshake-era client: counts server notifications by method."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            method = message.root.method if hasattr(message, "root") else message.method
            self.counts[method] = self.counts.get(method, 0) + 1
            self._arrived.set()
            self._arrived = anyio.Event()

    async def wait_for(self, method: str, count: int) -> None:
        with anyio.fail_after(TOLD_WITHIN):
            while self.counts.get(method, 0) < count:
                await self._arrived.wait()


_TRANSPORT = logging.getLogger("mcp.client.streamable_http")
_GET_STREAM_OPEN = "GET SSE connection established"


class _GetStreamOpened(logging.Handler):
    """Set once a client's standalone GET stream is open (the `mcp` client opens it in a task of its own after
    initializing, and says so in a debug line)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.opened = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == _GET_STREAM_OPEN:
            self.opened.set()


@contextmanager
def _get_stream_watched() -> Iterator[_GetStreamOpened]:
    handler, level = _GetStreamOpened(), _TRANSPORT.level
    _TRANSPORT.addHandler(handler)
    _TRANSPORT.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        _TRANSPORT.removeHandler(handler)
        _TRANSPORT.setLevel(level)


@asynccontextmanager
async def both_generations(live_url: str, tenant: Tenant) -> AsyncIterator[tuple[Notifications, Subscription]]:
    """A legacy-protocol session (told on its GET stream, once it is open and the server has remembered the client:
    what the server would send it before is dropped) and a 2026-07-28 one listening for list changes."""
    legacy = Notifications()
    async with AsyncExitStack() as stack:
        with _get_stream_watched() as stream:
            old: Client = await stack.enter_async_context(
                mcp_client(live_url, tenant, mode="legacy", message_handler=legacy)
            )
            with anyio.fail_after(TOLD_WITHIN):
                await stream.opened.wait()
        await old.list_tools()  # answered once the server has remembered the client (from its first message on)
        assert old.protocol_version == "2025-11-25"
        new: Client = await stack.enter_async_context(mcp_client(live_url, tenant, mode="2026-07-28"))
        changes = await stack.enter_async_context(new.listen(tools_list_changed=True, prompts_list_changed=True))
        yield legacy, changes


async def next_change(changes: Subscription) -> object:
    with anyio.fail_after(TOLD_WITHIN):
        return await anext(aiter(changes))
