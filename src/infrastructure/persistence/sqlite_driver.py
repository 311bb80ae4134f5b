"""SQLite through aiosqlite, in at most one hop to its thread per statement, and none for most.

aiosqlite runs SQLite in a thread of its own and hands each call over to it and back (a queue, then a wake-up of
the event loop). SQLAlchemy's adapter makes four such calls per statement that returns rows (open a cursor,
execute, fetch the rows, close the cursor) and three for the others; the hand-offs, not SQLite, were most of a
statement's cost. This adapter does the four in one call: the statement is executed in SQLite's thread, its
rows fetched and its cursor closed there, and the result comes back whole. SQLAlchemy sees the same cursor
(description, rows, rowcount, lastrowid). Server-side cursors (streamed results) are left as they were.

Most statements skip even that hop: they run on the event loop's thread, directly, since none of them waits for
another connection and a hop cost several times what SQLite takes to run a unit of work's short statements. In
WAL mode readers never wait, and never block a writer. A writing transaction begins with BEGIN IMMEDIATE, which
takes SQLite's write lock and may wait for another process that holds it: that statement goes to SQLite's
thread, where waiting blocks no one else. Holding the lock, nothing the transaction runs waits. Its COMMIT goes
to SQLite's thread too: a commit may checkpoint the log into the database file, and sync it to disk. (The
writers of this process take turns before they begin, see Database.writing.)
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
_MAY_WAIT = (WRITING_BEGIN, "PRAGMA")
"""Statements that may wait for a lock another process holds: the write lock, or (a connection's set-up, such as
its journal mode) the database's."""
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
        if operation.startswith(_MAY_WAIT):  # for another process's lock: in SQLite's thread
            async with adapted._execute_mutex:
                executed = await connection._execute(  # type: ignore[no-untyped-call]
                    _execute, connection._conn, operation, parameters, many
                )
            adapted.writing = adapted.writing or operation == WRITING_BEGIN
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
    __slots__ = ("writing",)
    _cursor_cls = OneHopCursor  # type: ignore[assignment]

    def __init__(self, dbapi: Any, connection: aiosqlite.Connection) -> None:
        super().__init__(dbapi, connection)
        self.writing = False
        """Whether a writing transaction is open: it holds SQLite's write lock."""

    def commit(self) -> None:
        if self._connection._connection is None:  # closed
            return
        if self.writing:  # it may checkpoint the log into the database file, and sync it: in SQLite's thread
            self.writing = False
            super().commit()
            return
        try:
            self._connection._conn.commit()
        except Exception as error:
            self._handle_exception(error)

    def rollback(self) -> None:
        self.writing = False
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
