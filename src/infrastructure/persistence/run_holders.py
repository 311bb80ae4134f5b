"""Which process holds a run, and whether that process still lives (PostgreSQL).

A process that executes runs itself (the in-process executor) stamps the runs it creates or takes with its
key, and holds a session advisory lock on that key for as long as it lives. PostgreSQL releases the lock when
the process's connection goes away (it exited, was killed, or lost the network), so another process starting
on the same database can tell the runs of a live process, which it leaves alone, from stranded ones, which it
recovers. SQLite databases serve one process, whose start recovers every unfinished run.
"""

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

logger = logging.getLogger(__name__)

PROCESS_KEY = secrets.randbelow(2**31 - 2) + 1
"""This process, as the holder of runs."""
_NAMESPACE = 0x746C  # the advisory locks of run holders, apart from other users of advisory locks
_CHECK_SECONDS = 10.0
_RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)

NOT_HELD_BY_A_LIVE_PROCESS = text(
    "NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
    f" AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND classid = {_NAMESPACE}"
    " AND objsubid = 2 AND objid::bigint = runs.holder)"
)
"""On PostgreSQL, a condition on runs: no live process holds the run (none ever did, or its holder is gone)."""


@contextlib.asynccontextmanager
async def holding_runs(database_url: str) -> AsyncIterator[None]:
    """While inside, this process is known as alive to the others (on PostgreSQL: one connection of its own).
    When the database cannot be reached, the process starts all the same and takes the lock once it can."""
    if make_url(database_url).get_backend_name() == "sqlite":
        yield
        return
    engine = create_async_engine(database_url, poolclass=NullPool)
    locked = asyncio.Event()
    holding = asyncio.create_task(_hold(engine, locked), name="run-holder-lock")
    try:
        await asyncio.wait({holding, asyncio.ensure_future(locked.wait())}, return_when=asyncio.FIRST_COMPLETED)
        yield
    finally:
        holding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await holding
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
