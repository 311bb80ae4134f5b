"""MCP catalog changes across the processes of a deployment, through PostgreSQL's LISTEN/NOTIFY.

The database announces them itself (triggers of migration 0010, sent at commit, whichever process wrote):
`integration <id>` when an integration's connection settings changed or it was deleted, `published <org id>`
when an organization's prompt templates or published agents changed (0017: `source <org id> <source id>` when
a source was added or deleted). Every process listens and acts on them at once: it drops the integration's
pooled session and cached catalogs, or tells the organization's /mcp clients that tools and prompts (or
resources) changed. Notices lost while the connection is down: /mcp clients are all told
once it is back, and cached catalogs refresh within their TTL (THREADLINE_MCP_CATALOG_TTL_SECONDS).
"""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from uuid import UUID

from domain.ids import IntegrationId, OrgId, SourceId
from infrastructure.execution.pg_listener import ChannelListener

logger = logging.getLogger(__name__)

CHANNEL = "threadline_catalogs"

Forget = Callable[[IntegrationId], Awaitable[None]]
"""Drop an integration's session and cached catalogs."""
Published = Callable[[OrgId | None], Awaitable[None]]
"""Tell an organization's /mcp clients (None: every organization's) that its tools and prompts changed."""
SourcesChanged = Callable[[OrgId | None, Sequence[SourceId] | None], Awaitable[None]]
"""Tell an organization's /mcp clients (None: every organization's) that sources (None: any) changed."""


class CatalogChangeListener(ChannelListener):
    """Applies the changes in the order they came, in a task of its own: forgetting an integration waits for its
    session (opening, or closing), and the process's other notices (run events, key revocations) do not wait for
    that."""

    def __init__(self, *, forget: Forget, published: Published, sources_changed: SourcesChanged) -> None:
        super().__init__(channel=CHANNEL, what="MCP catalog changes")
        self._forget, self._published, self._sources_changed = forget, published, sources_changed
        self._changes: asyncio.Queue[Callable[[], Awaitable[None]]] = asyncio.Queue()
        self._applying: asyncio.Task[None] | None = None
        self._closed = False

    async def close(self) -> None:
        self._closed = True
        if self._applying is not None:
            self._applying.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._applying

    async def listening_again(self) -> None:
        self._apply(lambda: self._published(None))  # what changed meanwhile is unknown
        self._apply(lambda: self._sources_changed(None, None))

    async def received(self, payload: str, pid: int) -> None:
        kind, _, value = payload.partition(" ")
        try:
            if kind == "integration":
                integration = IntegrationId(UUID(value))
                self._apply(lambda: self._forget(integration))
            elif kind == "published":
                org_id = OrgId(UUID(value))
                self._apply(lambda: self._published(org_id))
            elif kind == "source":
                org, _, source = value.partition(" ")
                changed = OrgId(UUID(org)), [SourceId(UUID(source))]
                self._apply(lambda: self._sources_changed(*changed))
        except ValueError:
            logger.warning("an MCP catalog change notice could not be read: %r", payload)

    def _apply(self, change: Callable[[], Awaitable[None]]) -> None:
        if self._closed:  # (the process stops)
            return
        self._changes.put_nowait(change)
        if self._applying is None or self._applying.done():
            self._applying = asyncio.create_task(self._applied(), name="mcp-catalog-changes")

    async def _applied(self) -> None:
        while True:
            change = await self._changes.get()
            try:
                await change()
            except Exception:
                logger.exception("an MCP catalog change could not be applied")
