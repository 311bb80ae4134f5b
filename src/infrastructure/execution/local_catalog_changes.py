"""MCP catalog changes within one process, for databases without LISTEN/NOTIFY (SQLite: one API process per
database). The engine's own events see every statement that adds, changes or deletes an agent or a prompt
template; once its transaction commits, the organization's /mcp clients are told that tools and prompts
changed. On PostgreSQL the database announces the same changes to every process (pg_catalog_changes.py)."""

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from sqlalchemy import Delete, Insert, Update, event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from domain.ids import OrgId

logger = logging.getLogger(__name__)

Published = Callable[[OrgId | None], Awaitable[None]]
"""Tell an organization's /mcp clients (None: every organization's) that its tools and prompts changed."""

CATALOG_TABLES = frozenset({"agents", "prompt_templates"})
_ORG_PARAMETER = re.compile(r"org_id(_\d+)?")
"""The bound parameters of an `org_id` value or condition (`values(org_id=...)`, `where(t.c.org_id == ...)`)."""
_PENDING = "threadline_catalog_changes"
_COMMITTED = "threadline_catalog_changes_committed"


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


class LocalCatalogChanges:
    """Watches an engine's statements; `close()` stops watching."""

    def __init__(self, engine: AsyncEngine, published: Published) -> None:
        self._engine = engine.sync_engine
        self._published = published
        self._tasks: set[asyncio.Task[None]] = set()
        event.listen(self._engine, "after_execute", self._executed)
        event.listen(self._engine, "commit", self._committed)
        event.listen(self._engine, "rollback", self._rolled_back)
        event.listen(self._engine, "checkin", self._checked_in)

    def _executed(self, conn: Connection, statement: Any, *_: Any) -> None:
        orgs = _changed_orgs(statement)
        if orgs:
            conn.info.setdefault(_PENDING, set()).update(orgs)

    @staticmethod
    def _committed(conn: Connection) -> None:
        # This event comes before the database commits: the clients are told once the connection is
        # handed back, so that what they list again includes the change.
        orgs = conn.info.pop(_PENDING, None)
        if orgs:
            conn.info.setdefault(_COMMITTED, set()).update(orgs)

    @staticmethod
    def _rolled_back(conn: Connection) -> None:
        conn.info.pop(_PENDING, None)

    def _checked_in(self, _dbapi_connection: Any, record: Any) -> None:
        orgs: set[OrgId | None] = record.info.pop(_COMMITTED, set())
        record.info.pop(_PENDING, None)
        if not orgs:
            return
        changes: list[OrgId | None] = [None] if None in orgs else list(orgs)
        task = asyncio.get_running_loop().create_task(self._tell(changes))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _tell(self, orgs: list[OrgId | None]) -> None:
        for org in orgs:
            try:
                await self._published(org)
            except Exception:
                logger.exception("an MCP catalog change could not be applied")

    async def close(self) -> None:
        event.remove(self._engine, "after_execute", self._executed)
        event.remove(self._engine, "commit", self._committed)
        event.remove(self._engine, "rollback", self._rolled_back)
        event.remove(self._engine, "checkin", self._checked_in)
        for task in list(self._tasks):
            task.cancel()
