"""MCP catalog changes across the processes of a deployment, through PostgreSQL's LISTEN/NOTIFY.

The database announces them itself (triggers of migration 0010, sent at commit, whichever process wrote):
`integration <id>` when an integration's connection settings changed or it was deleted, `published <org id>`
when an organization's prompt templates or published agents changed. Every process listens and acts on them
at once: it drops the integration's pooled session and cached catalogs, or tells the organization's /mcp
clients that tools and prompts changed. Notices lost while the connection is down: /mcp clients are all told
once it is back, and cached catalogs refresh within their TTL (THREADLINE_MCP_CATALOG_TTL_SECONDS).
"""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import psycopg

from domain.ids import IntegrationId, OrgId
from infrastructure.execution.pg_event_bus import RECONNECT_SECONDS, libpq_dsn

logger = logging.getLogger(__name__)

CHANNEL = "threadline_catalogs"

Forget = Callable[[IntegrationId], Awaitable[None]]
"""Drop an integration's session and cached catalogs."""
Published = Callable[[OrgId | None], Awaitable[None]]
"""Tell an organization's /mcp clients (None: every organization's) that its tools and prompts changed."""


class CatalogChangeListener:
    def __init__(self, database_url: str, *, forget: Forget, published: Published) -> None:
        self._dsn = libpq_dsn(database_url)
        self._forget, self._published = forget, published
        self._listening: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Returns once this process listens (changes committed from then on reach it), or once it failed to
        connect: it keeps trying in the background, and the process starts all the same."""
        try:
            listener: psycopg.AsyncConnection[Any] | None = await self._connected()
        except psycopg.OperationalError:
            logger.warning("MCP catalog changes of other processes cannot be received yet; retrying")
            listener = None
        self._listening = asyncio.create_task(self._listen(listener), name="catalog-changes-listener")

    async def close(self) -> None:
        if self._listening is not None:
            self._listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listening

    async def _connected(self) -> psycopg.AsyncConnection[Any]:
        listener = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        await listener.execute(f"LISTEN {CHANNEL}")
        return listener

    async def _listen(self, listener: psycopg.AsyncConnection[Any] | None) -> None:
        failures = 0
        while True:
            if listener is not None:
                try:
                    async with listener:
                        failures = 0
                        async for notification in listener.notifies():
                            await self._received(notification.payload)
                except psycopg.Error:  # whatever ended the listening (a lost connection, a protocol error...)
                    logger.warning("the connection that receives MCP catalog changes was lost; reconnecting")
            listener = await self._reconnect(failures)
            failures += 1
            await self._apply(self._published(None))  # what changed meanwhile is unknown

    async def _reconnect(self, failures: int) -> psycopg.AsyncConnection[Any]:
        while True:
            await asyncio.sleep(RECONNECT_SECONDS[min(failures, len(RECONNECT_SECONDS) - 1)])
            try:
                return await self._connected()
            except psycopg.OperationalError:
                failures += 1

    async def _received(self, payload: str) -> None:
        kind, _, value = payload.partition(" ")
        try:
            if kind == "integration":
                await self._apply(self._forget(IntegrationId(UUID(value))))
            elif kind == "published":
                await self._apply(self._published(OrgId(UUID(value))))
        except ValueError:
            logger.warning("an MCP catalog change notice could not be read: %r", payload)

    @staticmethod
    async def _apply(change: Awaitable[None]) -> None:
        try:
            await change
        except Exception:
            logger.exception("an MCP catalog change could not be applied")
