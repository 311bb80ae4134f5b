"""One long-lived session per integration per process: opened lazily, shared, reconnected, bounded."""

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

import httpx2
from mcp import StdioServerParameters

from application.errors import McpConnectionFailed
from application.ports.mcp import McpTarget
from domain.ids import IntegrationId
from infrastructure.mcp_client.connection import McpConnection
from infrastructure.outbound.guard import NetworkPolicy

logger = logging.getLogger(__name__)

ChangeListener = Callable[[IntegrationId, str], None]


class McpSessionPool:
    def __init__(
        self,
        *,
        max_sessions: int,
        idle_seconds: float,
        on_change: ChangeListener,
        outbound: NetworkPolicy,
        auth_for: Callable[[McpTarget], httpx2.Auth | None] = lambda _target: None,
    ) -> None:
        self._max = max_sessions
        self._auth_for = auth_for
        self._outbound = outbound
        self._idle_seconds = idle_seconds
        self._on_change = on_change
        self._sessions: dict[IntegrationId, McpConnection] = {}
        self._locks: dict[IntegrationId, asyncio.Lock] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False

    def new_connection(self, target: McpTarget, stdio: StdioServerParameters | None) -> McpConnection:
        integration_id = target.integration_id
        return McpConnection(
            target,
            stdio,
            self._outbound,
            lambda kind: self._on_change(integration_id, kind),
            auth=self._auth_for(target),
        )

    async def session(self, target: McpTarget, stdio: StdioServerParameters | None) -> McpConnection:
        """The live session for the target, opening (or reopening) it when needed."""
        current = self._sessions.get(target.integration_id)
        if current is not None and self._usable(current, target):
            return current
        lock = self._locks.setdefault(target.integration_id, asyncio.Lock())
        async with lock:
            current = self._sessions.get(target.integration_id)
            if current is not None and self._usable(current, target):
                return current
            if current is not None:
                await self._discard(target.integration_id)
            await self._make_room()
            connection = self.new_connection(target, stdio)
            await connection.open()
            if self._closed:
                await connection.close()
                raise McpConnectionFailed("the server is shutting down")
            self._sessions[target.integration_id] = connection
            self._start_reaper()
            return connection

    @staticmethod
    def _usable(connection: McpConnection, target: McpTarget) -> bool:
        return not connection.broken and connection.target.version == target.version

    async def _make_room(self) -> None:
        if len(self._sessions) < self._max:
            return
        idle = [c for c in self._sessions.values() if c.in_flight == 0]
        if not idle:
            raise McpConnectionFailed(f"all {self._max} pooled MCP sessions are busy; try again shortly")
        oldest = min(idle, key=lambda c: c.last_used)
        await self._discard(oldest.target.integration_id)

    async def _discard(self, integration_id: IntegrationId) -> None:
        connection = self._sessions.pop(integration_id, None)
        if connection is not None:
            await connection.close()

    async def drop(self, integration_id: IntegrationId) -> None:
        """Close the integration's session (it was updated, disabled or deleted, or it broke)."""
        lock = self._locks.setdefault(integration_id, asyncio.Lock())
        async with lock:
            await self._discard(integration_id)

    def _start_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.create_task(self._reap(), name="mcp-session-reaper")

    async def _reap(self) -> None:
        interval = max(self._idle_seconds / 4, 0.05)
        while self._sessions:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for integration_id, connection in list(self._sessions.items()):
                if connection.in_flight == 0 and (connection.broken or now - connection.last_used > self._idle_seconds):
                    logger.debug("closing idle MCP session", extra={"integration_id": str(integration_id)})
                    await self.drop(integration_id)

    async def close(self) -> None:
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
