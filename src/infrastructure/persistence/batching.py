"""The connection a unit of work's repositories write through: inserts that nothing reads back before the commit
are sent together.

On PostgreSQL every statement is a round trip to the server, and most of what a run's step writes are such
inserts (its message, its events, its usage). `later` keeps them, and they go to the server as one statement
(a WITH of inserts) when the unit of work commits, or before a statement that touches a table they write (a
read of what they wrote sees it) or deletes. They are written in the transaction as before: refused, they fail
the commit, and a rollback drops them. On SQLite there is no round trip to save, and no insert inside a WITH:
they run at once.
"""

import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Delete, Insert, Result, bindparam, literal_column, select
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Executable
from sqlalchemy.sql.util import find_tables

from infrastructure.persistence.prepared import (
    THROUGH_SQLALCHEMY,
    Driver,
    Prepared,
    Rows,
    driver_of,
    raise_as_sqlalchemy,
)

Parameters = Mapping[str, Any] | Sequence[Mapping[str, Any]] | None

_TABLES: "weakref.WeakKeyDictionary[Executable, frozenset[str]]" = weakref.WeakKeyDictionary()
"""The tables a statement touches, worked out once per statement object (most are built once, at import)."""


def _tables(statement: Executable) -> frozenset[str]:
    """The names of the tables the statement reads or writes; empty when it cannot be told (text)."""
    known = _TABLES.get(statement)
    if known is None:
        found = find_tables(statement, include_aliases=True, include_selects=True, include_crud=True)  # type: ignore[arg-type]
        names = (getattr(getattr(table, "original", table), "name", None) for table in found)
        known = frozenset(name for name in names if name)
        _TABLES[statement] = known
    return known


Shape = tuple[tuple[Prepared, tuple[tuple[str, ...], ...]], ...]
"""Inserts sent together: each statement, with the columns of each of its rows."""
_ROWS_TOGETHER = 16
"""The most rows sent as one WITH; more (a conversation of many turns stored at once) go as one executemany per
insert statement: a WITH that large would cost more to build and compile than its round trips, and rarely recur."""
_SHAPES_KEPT = 256
_TOGETHER: "OrderedDict[Shape, Prepared]" = OrderedDict()
"""One statement per shape, built and compiled once: each use only binds its values."""


def _together(shape: Shape) -> Prepared:
    """`WITH w0_0 AS (INSERT ...), w0_1 AS (INSERT ...) SELECT 1`, one single-row insert per row, its values
    bound as w<insert>_<row>_<column>."""
    together = _TOGETHER.get(shape)
    if together is not None:
        _TOGETHER.move_to_end(shape)
    else:
        ctes = []
        for number, (prepared, rows) in enumerate(shape):
            statement = cast(Insert, prepared.statement)  # `later` takes inserts
            columns = statement.table.c
            for index, keys in enumerate(rows):
                name = f"w{number}_{index}"
                values = {key: bindparam(f"{name}_{key}", type_=columns[key].type) for key in keys}
                ctes.append(statement.values(**values).cte(name))
        if len(_TOGETHER) >= _SHAPES_KEPT:
            _TOGETHER.popitem(last=False)  # the least recently used
        together = _TOGETHER[shape] = Prepared(select(literal_column("1")).add_cte(*ctes))
    return together


class UnitConnection:
    """What the repositories of one unit of work execute on: the transaction's connection, with writes kept for
    later (see the module's docstring), and the statements of a run's every step sent straight to the driver
    (`run`, see prepared.py)."""

    def __init__(self, connection: AsyncConnection, *, read_only: bool = False) -> None:
        self._connection = connection
        self.dialect: Dialect = connection.dialect
        # A read-only unit of work never commits: an insert there is refused at once, as the database refuses it.
        self._batching = connection.dialect.name == "postgresql" and not read_only
        self._pending: list[tuple[Prepared, list[Mapping[str, Any]]]] = []
        self._undo: list[Callable[[], None]] = []
        self._driver: Driver | None = None

    async def execute(self, statement: Executable, parameters: Parameters = None) -> Result[Any]:
        await self._flush_for(statement)
        return await self._connection.execute(statement, parameters)

    async def scalar(self, statement: Executable, parameters: Parameters = None) -> Any:
        await self._flush_for(statement)
        return await self._connection.scalar(statement, parameters)  # type: ignore[arg-type]

    async def run(self, prepared: Prepared, parameters: Mapping[str, Any]) -> Rows:
        """A prepared statement (prepared.py), sent straight to the driver in this transaction."""
        await self._flush_for(prepared.statement)
        return await self._run(prepared, parameters)

    async def _run(self, prepared: Prepared, parameters: Mapping[str, Any]) -> Rows:
        if self._driver is None:
            self._driver = await driver_of(self._connection)
        if self._driver is THROUGH_SQLALCHEMY or not self._connection.in_transaction():
            # (after a commit, SQLAlchemy begins a transaction of its own: a statement never runs outside one)
            result = await self._connection.execute(prepared.statement, parameters)
            return Rows(list(result) if result.returns_rows else [], result.rowcount)
        compiled = prepared.compiled(self.dialect, tuple(parameters))
        arguments = compiled.arguments(parameters)
        sync = self._connection.sync_connection
        announced = sync if sync is not None and (sync._has_events or sync.engine._has_events) else None
        if announced is not None:  # to what listens to SQLAlchemy's statement events, as SQLAlchemy announces them
            announced.dispatch.before_cursor_execute(announced, None, compiled.sql, arguments, None, False)
        try:
            fetched, rowcount = await self._driver(compiled.sql, arguments)
        except self.dialect.loaded_dbapi.Error as error:
            # Raised as SQLAlchemy raises it, a lost connection invalidated with its pool (errors.py: an outage).
            await self._connection.run_sync(raise_as_sqlalchemy, error, compiled.sql, arguments)
            raise  # not reached: raise_as_sqlalchemy raises
        if announced is not None:
            announced.dispatch.after_execute(announced, prepared.statement, (), parameters, {}, None)
        return Rows(compiled.rows(fetched), rowcount)

    async def later(self, insert: Prepared, rows: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Insert the row (or rows), at the latest when the unit of work commits. Nothing may depend on its
        outcome before then: a refused insert fails the commit."""
        rows = list(rows) if isinstance(rows, Sequence) else [rows]
        if self._batching:
            self._pending.append((insert, rows))
        elif len(rows) == 1:
            await self.run(insert, rows[0])
        else:
            await self._connection.execute(insert.statement, rows)

    async def flush(self) -> None:
        """Send the inserts kept for later: one statement (past _ROWS_TOGETHER rows, one executemany per statement)."""
        pending, self._pending = self._pending, []
        if len(pending) == 1 or sum(len(rows) for _, rows in pending) > _ROWS_TOGETHER:
            by_statement: dict[Prepared, list[Mapping[str, Any]]] = {}
            for insert, rows in pending:
                by_statement.setdefault(insert, []).extend(rows)
            for insert, rows in by_statement.items():  # each statement's rows at once (executemany)
                if len(rows) == 1:
                    await self._run(insert, rows[0])
                else:
                    await self._connection.execute(insert.statement, rows)
        elif pending:
            shape = tuple((insert, tuple(tuple(row) for row in rows)) for insert, rows in pending)
            parameters = {
                f"w{number}_{index}_{key}": value
                for number, (_, rows) in enumerate(pending)
                for index, row in enumerate(rows)
                for key, value in row.items()
            }
            await self._run(_together(shape), parameters)

    def unless_committed(self, undo: Callable[[], None]) -> None:
        """Call `undo` if the transaction ends without committing: what a repository noted in memory about rows it
        wrote (they are not stored after all)."""
        self._undo.append(undo)

    def committed(self) -> None:
        self._undo.clear()

    def discard(self) -> None:
        """Drop the inserts kept for later, and undo what was noted of the unit's writes (it is rolled back)."""
        self._pending.clear()
        undo, self._undo = self._undo, []
        for step in reversed(undo):
            step()

    async def _flush_for(self, statement: Executable) -> None:
        """The kept inserts sent first when the statement must see them: it touches a table they write, or it
        deletes (a delete may cascade to their rows, or remove the rows they refer to), or what it touches is
        unknown."""
        if not self._pending:
            return
        written = {cast(Insert, insert.statement).table.name for insert, _ in self._pending}
        if isinstance(statement, Delete) or not (tables := _tables(statement)) or not tables.isdisjoint(written):
            await self.flush()
