"""SQLite through aiosqlite in one hop to its thread per statement.

aiosqlite runs SQLite in a thread of its own and hands each call over to it and back (a queue, then a wake-up of
the event loop). SQLAlchemy's adapter makes four such calls per statement that returns rows (open a cursor,
execute, fetch the rows, close the cursor) and three for the others; the hand-offs, not SQLite, were most of a
statement's cost. This adapter does the four in one call: the statement is executed in SQLite's thread, its
rows fetched and its cursor closed there, and the result comes back whole. SQLAlchemy sees the same cursor
(description, rows, rowcount, lastrowid). Server-side cursors (streamed results) are left as they were.
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
        async with self._adapt_connection._execute_mutex:
            executed: Executed = await connection._execute(  # type: ignore[no-untyped-call]
                _execute, connection._conn, operation, parameters, many
            )
        self.description, rows, self.rowcount, self.lastrowid = executed  # type: ignore[misc]
        self._rows = deque(rows)

    async def _async_soft_close(self) -> None:
        return None  # nothing open: the rows are here already

    def close(self) -> None:
        self._rows.clear()

    def setinputsizes(self, *inputsizes: Any) -> None:
        return None


class OneHopConnection(AsyncAdapt_aiosqlite_connection):
    __slots__ = ()
    _cursor_cls = OneHopCursor  # type: ignore[assignment]


class OneHopDbapi(AsyncAdapt_aiosqlite_dbapi):
    """The aiosqlite DBAPI adapter whose connections run each statement in one hop."""

    def __init__(self) -> None:
        super().__init__(aiosqlite, sqlite3)

    def connect(self, *arg: Any, **kw: Any) -> OneHopConnection:
        adapted = super().connect(*arg, **kw)
        return OneHopConnection(self, adapted._connection)
