"""MCP catalog changes across the processes of a deployment, through PostgreSQL's LISTEN/NOTIFY.

The database announces them itself (triggers of migration 0010, sent at commit, whichever process wrote):
`integration <id>` when an integration's connection settings changed or it was deleted, `published <org id>`
when an organization's prompt templates or published agents changed (0017: `source <org id> <source id>` when
a source was added or deleted). Every process listens and acts on them at once: it drops the integration's
pooled session and cached catalogs, or tells the organization's /mcp clients that tools and prompts (or
resources) changed. Notices lost while the connection is down: /mcp clients are all told
once it is back, and cached catalogs refresh within their TTL (THREADLINE_MCP_CATALOG_TTL_SECONDS).
"""

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
    def __init__(self, *, forget: Forget, published: Published, sources_changed: SourcesChanged) -> None:
        super().__init__(channel=CHANNEL, what="MCP catalog changes")
        self._forget, self._published, self._sources_changed = forget, published, sources_changed

    async def listening_again(self) -> None:
        await self._apply(self._published(None))  # what changed meanwhile is unknown
        await self._apply(self._sources_changed(None, None))

    async def received(self, payload: str, pid: int) -> None:
        kind, _, value = payload.partition(" ")
        try:
            if kind == "integration":
                await self._apply(self._forget(IntegrationId(UUID(value))))
            elif kind == "published":
                await self._apply(self._published(OrgId(UUID(value))))
            elif kind == "source":
                org, _, source = value.partition(" ")
                await self._apply(self._sources_changed(OrgId(UUID(org)), [SourceId(UUID(source))]))
        except ValueError:
            logger.warning("an MCP catalog change notice could not be read: %r", payload)

    @staticmethod
    async def _apply(change: Awaitable[None]) -> None:
        try:
            await change
        except Exception:
            logger.exception("an MCP catalog change could not be applied")
