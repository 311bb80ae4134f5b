"""SQLite through aiosqlite, in at most one hop to its thread per statement, and none for most.

aiosqlite runs SQLite in a thread of its own and hands each call over to it and back (a queue, then a wake-up of
the event loop). SQLAlchemy's adapter makes four such calls per statement that returns rows (open a cursor,
execute, fetch the rows, close the cursor) and three for the others; the hand-offs, not SQLite, were most of a
statement's cost. This adapter does the four in one call: the statement is executed in SQLite's thread, its
rows fetched and its cursor closed there, and the result comes back whole. SQLAlchemy sees the same cursor
(description, rows, rowcount, lastrowid). Server-side cursors (streamed results) are left as they were.

Statements skip even that hop: they run on the event loop's thread, directly, as long as they cannot wait for
another connection, since a hop cost several times what SQLite takes to run a unit of work's short statements.
In WAL mode readers never wait, and never block a writer. A writing transaction begins with BEGIN IMMEDIATE,
which takes SQLite's write lock: it is tried here without waiting (busy timeout 0), and only when another
process holds the lock does it go to SQLite's thread, to wait there without holding anyone else up. Holding the
lock, nothing the transaction runs waits, its COMMIT included: with synchronous=NORMAL a commit appends to the
log without syncing it. What syncs (a checkpoint: the log copied into the database file) is left out of the
commits (wal_autocheckpoint=0) and done in SQLite's thread, every CHECKPOINT_EVERY writing transactions of the
process, after their turn (the writers of this process take turns before they begin, see Database.writing).
A connection's set-up (its PRAGMAs: the journal mode may wait for a lock) goes to SQLite's thread too.
"""

import sqlite3
from collections import deque
from collections.abc import Sequence
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util.concurrency import await_

WRITING_BEGIN = "BEGIN IMMEDIATE"
"""How a writing transaction begins (see engine.py): it takes SQLite's write lock at once."""
BUSY_TIMEOUT_MS = 30_000
"""How long a statement waits for a lock another process holds."""
CHECKPOINT_EVERY = 200
"""Writing transactions of the process between two checkpoints of the log into the database file."""
_CHECKPOINT = "PRAGMA wal_checkpoint(PASSIVE)"

Executed = tuple[Any, list[Any], int, int | None]
"""A statement's description, rows, rowcount and lastrowid."""


def _execute(connection: sqlite3.Connection, operation: str, parameters: Any, many: bool) -> Executed:
    """In SQLite's thread: the statement executed, its rows fetched, its cursor closed."""
    cursor = connection.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        elif parameters is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, parameters)
        description = cursor.description
        rows = cursor.fetchall() if description else []
        return description, rows, cursor.rowcount, cursor.lastrowid
    finally:
        cursor.close()


def _begun_at_once(connection: sqlite3.Connection) -> Executed | None:
    """BEGIN IMMEDIATE if SQLite's write lock is free now; None when another process holds it."""
    connection.execute("PRAGMA busy_timeout=0")
    try:
        return _execute(connection, WRITING_BEGIN, None, False)
    except sqlite3.OperationalError as error:
        if error.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:  # and its extended codes
            raise
        return None
    finally:
        connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")


async def _hop(adapted: "OneHopConnection", operation: Any, parameters: Any, many: bool) -> Executed:
    """The statement run in SQLite's thread, where it may wait for a lock without holding up the event loop."""
    connection: aiosqlite.Connection = adapted._connection  # type: ignore[assignment]
    async with adapted._execute_mutex:
        executed: Executed = await connection._execute(  # type: ignore[no-untyped-call]
            _execute, connection._conn, operation, parameters, many
        )
    return executed


def checkpoint(dbapi_connection: Any) -> None:
    """The log copied into the database file as far as readers allow, in SQLite's thread (it syncs to disk); called
    in SQLAlchemy's greenlet (AsyncConnection.run_sync), on a connection with no transaction open."""
    await_(_hop(dbapi_connection, _CHECKPOINT, None, False))


class OneHopCursor(AsyncAdapt_aiosqlite_cursor):
    __slots__ = ("arraysize", "description", "lastrowid", "rowcount")

    def __init__(self, adapt_connection: AsyncAdapt_aiosqlite_connection) -> None:
        # No aiosqlite cursor (opening one is a hop of its own): statements run on the connection's thread.
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._cursor = None  # type: ignore[assignment]
        self._rows = deque()
        self._soft_closed_memoized = {}  # type: ignore[assignment]
        self.description: Any = None
        # Plain attributes here (the slots above), where the base class reads the aiosqlite cursor's.
        self.rowcount = -1  # type: ignore[misc]
        self.lastrowid: int | None = None  # type: ignore[assignment]
        self.arraysize = 1

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        try:
            return await_(self._run(operation, parameters, many=False))
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    def executemany(self, operation: Any, seq_of_parameters: Sequence[Any]) -> Any:
        try:
            return await_(self._run(operation, seq_of_parameters, many=True))
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    async def _run(self, operation: Any, parameters: Any, *, many: bool) -> None:
        connection: aiosqlite.Connection = self._connection  # type: ignore[assignment]
        adapted: OneHopConnection = self._adapt_connection  # type: ignore[assignment]
        executed: Executed
        if operation == WRITING_BEGIN:
            executed = _begun_at_once(connection._conn) or await _hop(adapted, operation, parameters, many)
        elif operation.startswith("PRAGMA"):
            executed = await _hop(adapted, operation, parameters, many)
        else:
            executed = _execute(connection._conn, operation, parameters, many)  # waits for no one: no hop
        self.description, rows, self.rowcount, self.lastrowid = executed  # type: ignore[misc]
        self._rows = deque(rows)

    async def _async_soft_close(self) -> None:
        return None  # nothing open: the rows are here already

    def close(self) -> None:
        self._rows.clear()

    def setinputsizes(self, *inputsizes: Any) -> None:
        return None


class OneHopConnection(AsyncAdapt_aiosqlite_connection):
    _cursor_cls = OneHopCursor  # type: ignore[assignment]

    def commit(self) -> None:
        if self._connection._connection is None:  # closed
            return
        try:
            self._connection._conn.commit()
        except Exception as error:
            self._handle_exception(error)

    def rollback(self) -> None:
        if self._connection._connection is None:  # closed
            return
        try:
            self._connection._conn.rollback()
        except Exception as error:
            self._handle_exception(error)


class OneHopDbapi(AsyncAdapt_aiosqlite_dbapi):
    """The aiosqlite DBAPI adapter whose connections run each statement in one hop, or none."""

    def __init__(self) -> None:
        super().__init__(aiosqlite, sqlite3)

    def connect(self, *arg: Any, **kw: Any) -> OneHopConnection:
        adapted = super().connect(*arg, **kw)
        return OneHopConnection(self, adapted._connection)


def run_here(adapted: Any, operation: str, parameters: Sequence[Any]) -> tuple[list[Any], int]:
    """A statement of a prepared.py caller run on the event loop's thread, as OneHopCursor runs one that waits for
    no one (inside a transaction begun as engine.py begins it): its rows and the count of rows it touched."""
    try:
        _, rows, rowcount, _ = _execute(adapted._connection._conn, operation, parameters, False)
    except Exception as error:
        adapted._handle_exception(error)
    return rows, rowcount
