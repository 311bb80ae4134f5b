"""Rate limits as fixed one-minute windows: a count per key and minute. On PostgreSQL the count is a row that
every process of the deployment shares (one atomic upsert per counted request); on SQLite, which serves one
process, it is kept in memory."""

import hashlib
import logging
import math
from collections.abc import Callable
from typing import Protocol

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from starlette.types import ASGIApp, Receive, Scope, Send

from application.ports.limits import RateLimited
from application.ports.system import Clock
from domain.ids import OrgId
from infrastructure.http.bearer import bearer_token
from infrastructure.http.errors import error_response
from infrastructure.limits.org_limits import OrgLimits
from infrastructure.persistence.engine import Database

logger = logging.getLogger(__name__)
WINDOW_SECONDS = 60


class Windows(Protocol):
    async def hit(self, key: str, window_start: int, limit: int) -> bool:
        """Count one hit of `key` in the window, unless `limit` hits are counted already (then False)."""
        ...


class MemoryWindows:
    def __init__(self) -> None:
        self._counts: dict[str, tuple[int, int]] = {}

    async def hit(self, key: str, window_start: int, limit: int) -> bool:
        start, count = self._counts.get(key, (window_start, 0))
        if start != window_start:
            count = 0
        if count >= limit:
            return False
        if len(self._counts) > 100_000:  # keys of past windows
            self._counts = {k: v for k, v in self._counts.items() if v[0] == window_start}
        self._counts[key] = (window_start, count + 1)
        return True


_HIT = text(
    "INSERT INTO rate_limit_windows (key, window_start, count) VALUES (:key, :start, 1)"
    " ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limit_windows.count + 1"
    " WHERE rate_limit_windows.count < :limit RETURNING count"
)
_FORGET = text("DELETE FROM rate_limit_windows WHERE window_start < :start")
"""Every key's past windows (a bearer token that never comes back, an organization gone quiet): the table
holds the current minute's counters only."""


class DatabaseWindows:
    def __init__(self, database: Database) -> None:
        self._database = database

    async def hit(self, key: str, window_start: int, limit: int) -> bool:
        async with self._database.engine.begin() as conn:
            count = (await conn.execute(_HIT, {"key": key, "start": window_start, "limit": limit})).scalar()
            if count == 1:  # the window's first hit: the older windows are over
                await conn.execute(_FORGET, {"start": window_start})
        return count is not None


def windows_for(database: Database) -> Windows:
    return MemoryWindows() if database.is_sqlite else DatabaseWindows(database)


def _window(clock: Clock) -> tuple[int, int]:
    """The current window's start, and the seconds until the next one."""
    now = clock.now().timestamp()
    start = int(now // WINDOW_SECONDS) * WINDOW_SECONDS
    return start, max(1, math.ceil(start + WINDOW_SECONDS - now))


class OrgRunRateLimit:
    """THREADLINE_ORG_RUNS_PER_MINUTE, or an organization's own runs per minute."""

    def __init__(self, windows: Windows, limits: OrgLimits, clock: Clock) -> None:
        self._windows, self._limits, self._clock = windows, limits, clock

    async def take(self, org_id: OrgId) -> None:
        try:
            limit = (await self._limits.of(org_id)).runs_per_minute
            if limit is None:
                return
            start, retry_after = _window(self._clock)
            allowed = await self._windows.hit(f"org-runs:{org_id}", start, limit)
        except SQLAlchemyError:
            # The limit is not checked while the database is away; creating the run reports the outage.
            logger.warning("the run rate limit could not be checked: the database is unavailable")
            return
        if not allowed:
            raise RateLimited(
                f"the organization may start {limit} runs per minute; try again in {retry_after} s",
                retry_after_seconds=retry_after,
            )


class KeyRequestRate:
    """ASGI middleware: at most `per_minute` requests per API key (the bearer token, counted by its hash) to
    /v1 and /mcp; the rest are answered 429 with Retry-After before anything runs."""

    def __init__(self, app: ASGIApp, *, windows: Callable[[], Windows], per_minute: int | None, clock: Clock) -> None:
        """`windows` is called per request: the counters exist once the app's resources are open."""
        self.app, self._windows, self._per_minute, self._clock = app, windows, per_minute, clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = _bearer(scope) if self._per_minute and scope["type"] == "http" else None
        if token is None or not str(scope.get("path", "")).startswith(("/v1/", "/mcp")):
            await self.app(scope, receive, send)
            return
        assert self._per_minute is not None
        start, retry_after = _window(self._clock)
        key = "key-requests:" + hashlib.sha256(token.encode()).hexdigest()[:40]
        try:
            allowed = await self._windows().hit(key, start, self._per_minute)
        except SQLAlchemyError:
            logger.warning("the request rate limit could not be checked: the database is unavailable")
            allowed = True
        if allowed:
            await self.app(scope, receive, send)
            return
        detail = f"an API key may make {self._per_minute} requests per minute; try again in {retry_after} s"
        await error_response(429, "RateLimited", detail, {"Retry-After": str(retry_after)})(scope, receive, send)


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return bearer_token(value.decode("latin-1"))
    return None
