import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from infrastructure.persistence.sqlite_driver import (
    BUSY_TIMEOUT_MS,
    CHECKPOINT_EVERY,
    WRITING_BEGIN,
    OneHopDbapi,
    checkpoint,
)
from infrastructure.persistence.vector_cache import VectorCache

READ_ONLY = "threadline_read_only"
logger = logging.getLogger(__name__)


class Database:
    """The engine, plus what it takes to write safely to it.

    SQLite allows one writer at a time. Writers of this process queue on an asyncio lock rather
    than in SQLite's busy handler, whose sleeps would make latency spiky; readers never wait
    (WAL mode). A writer's turn lasts from before its BEGIN to its COMMIT or ROLLBACK, nothing more:
    every writer of the process waits for it. So the log is checkpointed into the database file
    (every CHECKPOINT_EVERY writing transactions, in SQLite's thread: it syncs to disk) once a turn
    has ended, not within it. PostgreSQL needs none of this.
    """

    def __init__(self, database_url: str, *, pool_size: int = 10) -> None:
        self.url = database_url
        self.is_sqlite = make_url(database_url).get_backend_name() == "sqlite"
        self.engine = _sqlite_engine(database_url) if self.is_sqlite else _server_engine(database_url, pool_size)
        self._write_lock = asyncio.Lock() if self.is_sqlite else None
        self._writes = 0
        self.vector_cache = VectorCache()
        """Passage vectors between searches (see vector_cache.py)"""

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[None]:
        if self._write_lock is None:
            yield
            return
        async with self._write_lock:
            yield
        self._writes += 1
        if self._writes % CHECKPOINT_EVERY == 0:
            await self._checkpoint()

    async def _checkpoint(self) -> None:
        """The log copied into the database file as far as readers allow; other writers go on meanwhile."""
        try:
            async with self.engine.connect() as connection:
                await connection.run_sync(lambda synced: checkpoint(synced.connection.dbapi_connection))
        except Exception as error:  # committed all the same; the next checkpoint takes this one's pages too
            logger.warning("the SQLite log could not be checkpointed: %s", error)

    async def dispose(self) -> None:
        await self.engine.dispose()


def build_engine(database_url: str, *, pool_size: int = 10) -> AsyncEngine:
    return Database(database_url, pool_size=pool_size).engine


def _server_engine(database_url: str, pool_size: int) -> AsyncEngine:
    # No pool_pre_ping: it costs a round trip per checkout (several per run). A connection the server closed
    # (restart, pg_terminate_backend) is known closed to the driver once the event loop has read the end of
    # its socket, and is replaced at checkout below; one lost in any other way fails the statement that uses
    # it (StorageUnavailable, see errors.py), and SQLAlchemy then replaces every connection of the pool.
    engine = create_async_engine(database_url, pool_size=pool_size, max_overflow=pool_size, pool_recycle=1800)

    @event.listens_for(engine.sync_engine, "checkout")
    def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if _closed(dbapi_connection):
            raise DisconnectionError("the server closed this connection")  # the pool connects afresh

    return engine


def _closed(dbapi_connection: Any) -> bool:
    """Whether the driver already knows the connection is closed (asyncpg's is_closed(), psycopg's closed);
    asked without a round trip."""
    driver_connection = getattr(dbapi_connection, "_connection", dbapi_connection)
    is_closed = getattr(driver_connection, "is_closed", None)
    if callable(is_closed):
        return bool(is_closed())
    return bool(getattr(driver_connection, "closed", False))


def _sqlite_engine(database_url: str) -> AsyncEngine:
    engine = create_async_engine(
        database_url,
        # Not checked for the thread: a connection is SQLite's thread's, but a writing transaction's statements run
        # on the event loop's (see sqlite_driver.py), one at a time.
        connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
        module=OneHopDbapi(),  # one hand-off to SQLite's thread per statement (see sqlite_driver.py)
    )

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let us issue BEGIN ourselves (below) instead of the driver's implicit one.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints are the driver's (see sqlite_driver.py)
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        # A writing transaction takes the write lock up front, so it never fails later when a
        # read inside it turns into a write; a reading one takes a snapshot and no lock.
        read_only = connection.get_execution_options().get(READ_ONLY, False)
        connection.exec_driver_sql("BEGIN" if read_only else WRITING_BEGIN)

    return engine
