"""MCP catalog changes within one process, for databases without LISTEN/NOTIFY (SQLite: one API process per
database). The engine's own events see every statement that adds, changes or deletes an agent or a prompt
template, or adds or deletes a source (or a thread or agent, whose sources go with it); once its transaction
commits, the organization's /mcp clients are told that tools and prompts, or resources, changed. On PostgreSQL
the database announces the same changes to every process (pg_catalog_changes.py)."""

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from uuid import UUID

from sqlalchemy import Delete, Insert, Update, event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from domain.ids import OrgId, SourceId

logger = logging.getLogger(__name__)

Published = Callable[[OrgId | None], Awaitable[None]]
"""Tell an organization's /mcp clients (None: every organization's) that its tools and prompts changed."""
SourcesChanged = Callable[[OrgId | None, Sequence[SourceId] | None], Awaitable[None]]
"""Tell an organization's /mcp clients (None: every organization's) that sources (None: any) changed."""

CATALOG_TABLES = frozenset({"agents", "prompt_templates"})
SOURCE_OWNERS = frozenset({"threads", "agents"})
"""Tables whose rows take their sources with them when deleted"""
_ORG_PARAMETER = re.compile(r"org_id(_\d+)?")
"""The bound parameters of an `org_id` value or condition (`values(org_id=...)`, `where(t.c.org_id == ...)`)."""
_ID_PARAMETER = re.compile(r"id(_\d+)?")
_PENDING = "threadline_catalog_changes"
_COMMITTED = "threadline_catalog_changes_committed"
_PENDING_SOURCES = "threadline_source_changes"
_COMMITTED_SOURCES = "threadline_source_changes_committed"

SourceChanges = dict[OrgId | None, set[SourceId] | None]
"""Per organization, the sources added or deleted (None: unknown which)"""


def _changed_orgs(statement: Any) -> set[OrgId | None] | None:
    """The organizations whose catalog a statement changes, None when it changes none (None inside: unknown)."""
    if (
        not isinstance(statement, (Insert, Update, Delete))
        or getattr(statement.table, "name", None) not in CATALOG_TABLES
    ):
        return None
    params = statement.compile().params
    found: set[OrgId | None] = {
        OrgId(value) for key, value in params.items() if _ORG_PARAMETER.fullmatch(key) and isinstance(value, UUID)
    }
    return found or {None}


def _changed_sources(statement: Any) -> SourceChanges | None:
    """The sources a statement adds or deletes, by organization; None when it touches none."""
    if not isinstance(statement, (Insert, Delete)):
        return None
    table = getattr(statement.table, "name", None)
    if table != "sources" and not (isinstance(statement, Delete) and table in SOURCE_OWNERS):
        return None
    params = statement.compile().params
    orgs = [OrgId(v) for k, v in params.items() if _ORG_PARAMETER.fullmatch(k) and isinstance(v, UUID)]
    ids = {SourceId(v) for k, v in params.items() if _ID_PARAMETER.fullmatch(k) and isinstance(v, UUID)}
    known = ids if table == "sources" and ids else None
    return {org: known for org in orgs} or {None: None}


def _merge(into: SourceChanges, changes: SourceChanges) -> None:
    for org, ids in changes.items():
        if ids is None or (org in into and into[org] is None):
            into[org] = None
        else:
            into[org] = {*(into.get(org) or set()), *ids}


class LocalCatalogChanges:
    """Watches an engine's statements; `close()` stops watching."""

    def __init__(self, engine: AsyncEngine, published: Published, sources_changed: SourcesChanged) -> None:
        self._engine = engine.sync_engine
        self._published, self._sources_changed = published, sources_changed
        self._tasks: set[asyncio.Task[None]] = set()
        event.listen(self._engine, "after_execute", self._executed)
        event.listen(self._engine, "commit", self._committed)
        event.listen(self._engine, "rollback", self._rolled_back)
        event.listen(self._engine, "checkin", self._checked_in)

    def _executed(self, conn: Connection, statement: Any, *_: Any) -> None:
        orgs = _changed_orgs(statement)
        if orgs:
            conn.info.setdefault(_PENDING, set()).update(orgs)
        sources = _changed_sources(statement)
        if sources:
            _merge(conn.info.setdefault(_PENDING_SOURCES, {}), sources)

    @staticmethod
    def _committed(conn: Connection) -> None:
        # This event comes before the database commits: the clients are told once the connection is
        # handed back, so that what they list again includes the change.
        orgs = conn.info.pop(_PENDING, None)
        if orgs:
            conn.info.setdefault(_COMMITTED, set()).update(orgs)
        sources = conn.info.pop(_PENDING_SOURCES, None)
        if sources:
            _merge(conn.info.setdefault(_COMMITTED_SOURCES, {}), sources)

    @staticmethod
    def _rolled_back(conn: Connection) -> None:
        conn.info.pop(_PENDING, None)
        conn.info.pop(_PENDING_SOURCES, None)

    def _checked_in(self, _dbapi_connection: Any, record: Any) -> None:
        orgs: set[OrgId | None] = record.info.pop(_COMMITTED, set())
        sources: SourceChanges = record.info.pop(_COMMITTED_SOURCES, {})
        record.info.pop(_PENDING, None)
        record.info.pop(_PENDING_SOURCES, None)
        if not orgs and not sources:
            return
        changes: list[OrgId | None] = [None] if None in orgs else list(orgs)
        task = asyncio.get_running_loop().create_task(self._tell(changes, sources))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _tell(self, orgs: list[OrgId | None], sources: SourceChanges) -> None:
        for org in orgs:
            try:
                await self._published(org)
            except Exception:
                logger.exception("an MCP catalog change could not be applied")
        for source_org, ids in [(None, None)] if None in sources else list(sources.items()):
            try:
                await self._sources_changed(source_org, None if ids is None else sorted(ids))
            except Exception:
                logger.exception("an MCP resource change could not be applied")

    async def close(self) -> None:
        event.remove(self._engine, "after_execute", self._executed)
        event.remove(self._engine, "commit", self._committed)
        event.remove(self._engine, "rollback", self._rolled_back)
        event.remove(self._engine, "checkin", self._checked_in)
        for task in list(self._tasks):
            task.cancel()
