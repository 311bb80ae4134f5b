"""Which process holds a run, and whether that process still lives (PostgreSQL).

Every process stamps the runs it creates, takes to execute, or resumes for its caller with its key (`runs.holder`).

A process that executes runs itself (the in-process executor) holds a session advisory lock on that key for as
long as it lives. PostgreSQL releases the lock when the process's connection goes away (it exited, was killed, or
lost the network), so another process starting on the same database can tell the runs of a live process, which it
leaves alone, from stranded ones, which it recovers. SQLite databases serve one process, whose start recovers every
unfinished run.

In worker mode a run's job is how it is taken on when its process is lost; the runs a process executes in a
caller's task have none (a published agent called over MCP, in the API process that serves the call; a sub-agent's
run, in the task of the run that delegated to it). Every process says every quarter of
`THREADLINE_WORKER_LOST_SECONDS` that it lives (`heard_from`: its row of `run_holders`, written on a connection of
its own), and the workers end the runs with no job whose holder has been silent for twice as long
(RecoverRuns.end_stranded): the process stopped, and no one waits for their answers. The database's clock says who
is silent, and the worker's own clock confirms it (SilenceWitness): a forward step of the database's clock makes
every process look silent at once, but a live one writes its row again within a quarter of the lost time. An
advisory lock would not do there: it lapses whenever its connection does (the database restarting or failing over),
and a check every few seconds would then end the runs of live processes. A silent row is as a worker's silent
heartbeat is to procrastinate, with twice the patience (ending a run is for good, where taking a lost worker's job
over resumes it).
A process that never wrote a row (one of an earlier version, during a rolling upgrade) is not judged.
"""

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

logger = logging.getLogger(__name__)

PROCESS_KEY = secrets.randbelow(2**31 - 2) + 1
"""This process, as the holder of runs."""
_NAMESPACE = 0x746C  # the advisory locks of run holders, apart from other users of advisory locks
_CHECK_SECONDS = 10.0
FORGOTTEN_AFTER = "1 day"
"""A process silent this long, none of whose runs is unfinished, is forgotten (its row deleted)."""
_RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)

NOT_HELD_BY_A_LIVE_PROCESS = text(
    "NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
    f" AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND classid = {_NAMESPACE}"
    " AND objsubid = 2 AND objid::bigint = runs.holder)"
)
"""On PostgreSQL, a condition on runs: no live process holds the run (none ever did, or its holder is gone)."""


SILENCE_OF_THE_STRANDED = 2.0
"""How many times `THREADLINE_WORKER_LOST_SECONDS` a process is silent before the runs it executed with no job end
(twice a worker's: ending a run is for good, where taking a lost worker's job over resumes the run)."""
SILENT_HOLDER = text(
    "EXISTS (SELECT 1 FROM run_holders h WHERE h.holder = runs.holder"
    " AND h.seen_at < now() - make_interval(secs => CAST(:silent_seconds AS double precision))"
    " AND (h.holder, h.seen_at) IN"
    " (SELECT * FROM unnest(CAST(:witnessed_holders AS bigint[]), CAST(:witnessed_seen AS timestamptz[]))))"
)
"""A condition on runs (worker mode): their holder has not been heard from for `silent_seconds`, and is one of those
this process saw silent for long enough itself (`witnessed` gives the parameters: SilenceWitness)."""
SILENT_HOLDERS = text(
    "SELECT holder, seen_at FROM run_holders"
    " WHERE seen_at < now() - make_interval(secs => CAST(:silent_seconds AS double precision))"
)


class SilenceWitness:
    """Which processes this one saw silent, on its own clock. The database's clock says a process has been silent
    (its row not written for so long); a forward step of that clock would say so of every process at once. A
    process is taken for stopped only once this one, too, has seen its row unchanged for `patience` seconds of its
    own monotonic clock: a live process writes its row every quarter of the lost time."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._since: dict[int, tuple[datetime, float]] = {}
        """Each process seen silent: its row's time as seen, and since when (this process's clock) it is so."""
        self.stopped: list[tuple[int, datetime]] = []
        """The processes taken for stopped at the last look, with their row's time."""

    def saw(self, silent: Sequence[tuple[int, datetime]], patience: float) -> list[tuple[int, datetime]]:
        """The processes that the database says are silent (their rows), as this process sees them now: those whose
        row it has seen unchanged for `patience` seconds are taken for stopped. A process heard from again starts
        over."""
        now, rows = self.clock(), dict(silent)
        self._since = {holder: seen for holder, seen in self._since.items() if rows.get(holder) == seen[0]}
        for holder, seen_at in rows.items():
            self._since.setdefault(holder, (seen_at, now))
        self.stopped = [
            (holder, seen_at) for holder, (seen_at, since) in self._since.items() if now - since >= patience
        ]
        return self.stopped


WITNESS = SilenceWitness()
"""This process's witness (a worker's: workers end the runs of silent processes)."""


def witnessed(stopped: Sequence[tuple[int, datetime]]) -> dict[str, list[Any]]:
    """SILENT_HOLDER's parameters for the processes taken for stopped."""
    return {"witnessed_holders": [holder for holder, _ in stopped], "witnessed_seen": [seen for _, seen in stopped]}


_HEARD = text(
    "INSERT INTO run_holders (holder, seen_at) VALUES (:holder, now())"
    " ON CONFLICT (holder) DO UPDATE SET seen_at = excluded.seen_at"
)
_FORGET = text(
    f"DELETE FROM run_holders h WHERE h.seen_at < now() - interval '{FORGOTTEN_AFTER}' AND NOT EXISTS"
    " (SELECT 1 FROM runs r WHERE r.holder = h.holder AND r.status IN ('queued', 'in_progress', 'requires_action'))"
)
_steady_since: float | None = None
"""Since when (time.monotonic) this process has been heard from at every beat; None while it is not."""


def heard_steadily_for() -> float:
    """How long this process has been heard from without a gap (0 when it is not heard from now). A process judges
    others' silence only after being heard from steadily for as long as it asks of them: after an outage of the
    database, every process was silent, and the live ones are heard from again within a beat or two."""
    return 0.0 if _steady_since is None else time.monotonic() - _steady_since


@contextlib.asynccontextmanager
async def heard_from(database_url: str, lost_seconds: float) -> AsyncIterator[None]:
    """While inside, worker mode's processes hear from this one every quarter of `lost_seconds`, on a connection of
    its own (one that does not answer within half of `lost_seconds` is dropped for another). When the database
    cannot be reached the process goes on all the same: its runs are judged only once it has been heard from."""
    async with _in_background(database_url, lambda engine: _beat(engine, lost_seconds / 4), "run-holder-heartbeat"):
        yield


async def _beat(engine: AsyncEngine, every: float) -> None:
    global _steady_since
    connection: AsyncConnection | None = None
    failures = 0
    forgotten = False
    try:
        while True:
            try:
                async with asyncio.timeout(2 * every):  # a peer gone without a word: another connection, in time
                    if connection is None:
                        connection = await engine.connect()
                    await connection.execute(_HEARD, {"holder": PROCESS_KEY})
                    await connection.commit()
                if failures:
                    logger.info("this process is heard from again by the others")
                if _steady_since is None:
                    _steady_since = time.monotonic()
                failures = 0
                if not forgotten:  # tried once per process, on its own: the rows of processes long gone
                    forgotten = True
                    if not await _forgot(connection, within=2 * every):
                        await _dropped(connection)  # in doubt: the next beat opens another
                        connection = None
            except Exception as error:  # whatever it is, the beat goes on: a process not heard from looks dead
                _steady_since = None
                if failures == 0:
                    logger.warning("this process cannot tell the others that it lives: %s; retrying", error)
                failures += 1
                if connection is not None:
                    await _dropped(connection)
                    connection = None
            await asyncio.sleep(
                every if failures == 0 else min(every, _RETRY_SECONDS[min(failures, len(_RETRY_SECONDS)) - 1])
            )
    finally:
        _steady_since = None
        if connection is not None:
            await _closed(connection, within=every)


async def _forgot(connection: AsyncConnection, within: float) -> bool:
    """Whether the rows of processes long gone were deleted (the next process to start tries again). A failure here
    says nothing of this process's own row, which is written."""
    try:
        async with asyncio.timeout(within):
            await connection.execute(_FORGET)
            await connection.commit()
    except Exception as error:
        logger.info("the processes long gone could not be forgotten: %s", error)
        return False
    return True


async def _dropped(connection: AsyncConnection) -> None:
    """A connection in doubt, given up (SQLAlchemy's invalidate: a close tried briefly, then the socket dropped)."""
    with contextlib.suppress(Exception):
        await connection.invalidate()


async def _closed(connection: AsyncConnection, within: float) -> None:
    try:
        async with asyncio.timeout(within):
            await connection.close()
    except Exception:
        await _dropped(connection)


@contextlib.asynccontextmanager
async def holding_runs(database_url: str) -> AsyncIterator[None]:
    """While inside, this process is known as alive to the others (on PostgreSQL: one connection of its own).
    When the database cannot be reached, the process starts all the same and takes the lock once it can."""
    if make_url(database_url).get_backend_name() == "sqlite":
        yield
        return
    locked = asyncio.Event()
    async with _in_background(database_url, lambda engine: _hold(engine, locked), "run-holder-lock") as holding:
        await asyncio.wait({holding, asyncio.ensure_future(locked.wait())}, return_when=asyncio.FIRST_COMPLETED)
        yield


@contextlib.asynccontextmanager
async def _in_background(
    database_url: str, keep: Callable[[AsyncEngine], Coroutine[Any, Any, None]], name: str
) -> AsyncIterator["asyncio.Task[None]"]:
    """`keep` runs in a task of its own while inside, on an engine of its own (no pool: its connections are its
    own), cancelled on the way out."""
    engine = create_async_engine(database_url, poolclass=NullPool)
    task = asyncio.create_task(keep(engine), name=name)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await engine.dispose()


async def _hold(engine: AsyncEngine, locked: asyncio.Event) -> None:
    """Take the lock and keep its connection open; take it again if the connection is lost."""
    failures = 0
    while True:
        try:
            async with engine.connect() as connection:
                await connection.execute(text(f"SELECT pg_advisory_lock({_NAMESPACE}, {PROCESS_KEY})"))
                await connection.commit()
                locked.set()
                failures = 0
                while True:  # a lost connection is a lost lock: noticed here, and taken again
                    await asyncio.sleep(_CHECK_SECONDS)
                    await connection.execute(text("SELECT 1"))
                    await connection.commit()
        except (OSError, SQLAlchemyError):
            if failures == 0:
                logger.warning("this process cannot show other processes that it holds its runs yet; retrying")
            locked.set()  # the process goes on starting; the lock follows once the database answers
        await asyncio.sleep(_RETRY_SECONDS[min(failures, len(_RETRY_SECONDS) - 1)])
        failures += 1
