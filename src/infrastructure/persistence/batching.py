"""The connection a unit of work's repositories write through: writes that nothing reads back before the commit
are sent together.

On PostgreSQL every statement is a round trip to the server, and what a run's step writes is such writes: its
run (checked against its lease), its thread's count, its message, its events, its usage. `later` keeps an insert
or an update, `guard` the update of the row the others depend on (refused, nothing of the unit is written), and
they go to the server as one statement (a WITH: the guard first, each other write gated on it) when the unit of
work commits, or before a statement that touches a table they write (a read of what they wrote sees it) or
deletes. Sent at commit with nothing before them, that one statement is the whole transaction: it goes without
BEGIN and COMMIT (a statement is atomic). Otherwise they are written in the transaction as before: refused, they
fail the commit, and a rollback drops them. On SQLite there is no round trip to save, and no write inside a WITH:
they run at once.
"""

import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Delete, Insert, Result, Select, String, Update, bindparam, exists, func, literal_column, select
from sqlalchemy import cast as sql_cast
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import ColumnElement, Executable
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.util import find_tables
from sqlalchemy.sql.visitors import iterate, replacement_traverse

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


Writes = tuple[tuple[Prepared, tuple[tuple[str, ...], ...]], ...]
"""Writes sent together: each statement, with the parameter names of each of its rows."""
Shape = tuple[tuple[Prepared, tuple[str, ...]] | None, Writes]
"""The guard (its update and parameter names), if any, and the writes gated on it."""
_ROWS_TOGETHER = 16
"""The most rows sent as one WITH; more (a conversation of many turns stored at once) go as one executemany per
insert statement: a WITH that large would cost more to build and compile than its round trips, and rarely recur."""
_SHAPES_KEPT = 256
_TOGETHER: "OrderedDict[Shape, Prepared]" = OrderedDict()
"""One statement per shape, built and compiled once: each use only binds its values."""


def _own_parameters(statement: Executable) -> frozenset[str]:
    return frozenset(e.key for e in iterate(statement) if isinstance(e, BindParameter))  # type: ignore[arg-type]


def _typed(value: BindParameter[Any]) -> ColumnElement[Any]:
    """The value cast to its column's type, as a value in a VALUES list is: a string's length not in the cast, so
    that one too long is refused when stored (an explicit cast to VARCHAR(n) would cut it)."""
    target = value.type
    if isinstance(target, String) and target.length is not None:
        target = String()
    return sql_cast(value, target)


def _written(prepared: Prepared, keys: tuple[str, ...], prefix: str, gate: ColumnElement[bool] | None) -> Any:
    """The write as a part of a WITH, its parameters named `prefix` + their names, done only if `gate` holds. An
    insert takes its row's values; an update its own parameters (its WHERE, the values it sets itself) and the
    values of the columns named by the other keys."""
    statement = prepared.statement
    columns = cast(Insert | Update, statement).table.c
    if isinstance(statement, Insert):
        if gate is None:
            return statement.values(**{key: bindparam(prefix + key, type_=columns[key].type) for key in keys})
        row = select(*(_typed(bindparam(prefix + key, type_=columns[key].type)) for key in keys))
        return statement.from_select(list(keys), row.where(gate), include_defaults=False)
    own = _own_parameters(statement)

    def renamed(element: Any) -> Any:
        if not isinstance(element, BindParameter):
            return None
        if element.value is not None or element.callable is not None:
            raise ValueError(f"a write kept for later takes every value from its parameters: {statement}")
        return bindparam(prefix + element.key, type_=element.type)

    values = {key: bindparam(key, type_=columns[key].type) for key in keys if key not in own}
    # The values set, then every parameter renamed (a traversed statement takes no more values).
    written = cast(Update, statement).values(**values) if values else statement
    update = cast(Update, replacement_traverse(written, {}, renamed))  # type: ignore[call-overload]
    return update if gate is None else update.where(gate)


def _together(shape: Shape) -> Prepared:
    """`WITH g AS (UPDATE ... RETURNING 1), w0_0 AS (INSERT ... SELECT ... WHERE EXISTS (SELECT 1 FROM g)), ...
    SELECT count(*) FROM g`: the guard, then one single-row write per row, gated on the guard; each row's values
    bound as w<write>_<row>_<name> (the guard's as g_<name>). Without a guard: the writes, then SELECT 1."""
    together = _TOGETHER.get(shape)
    if together is not None:
        _TOGETHER.move_to_end(shape)
        return together
    guard, writes = shape
    ctes: list[Any] = []
    gate: ColumnElement[bool] | None = None
    top: Select[Any] = select(literal_column("1"))
    if guard is not None:
        update, keys = guard
        guarding = _written(update, keys, "g_", None).returning(literal_column("1")).cte("g")
        ctes.append(guarding)
        gate = exists(select(literal_column("1")).select_from(guarding))
        top = select(func.count()).select_from(guarding)
    for number, (prepared, rows) in enumerate(writes):
        for index, keys in enumerate(rows):
            name = f"w{number}_{index}"
            ctes.append(_written(prepared, keys, f"{name}_", gate).cte(name))
    if len(_TOGETHER) >= _SHAPES_KEPT:
        _TOGETHER.popitem(last=False)  # the least recently used
    together = _TOGETHER[shape] = Prepared(top.add_cte(*ctes))
    return together


@dataclass(frozen=True)
class _Guard:
    update: Prepared
    parameters: Mapping[str, Any]
    refused: Callable[[], Awaitable[None]]


class UnitConnection:
    """What the repositories of one unit of work execute on: the transaction's connection, with writes kept for
    later (see the module's docstring), and the statements of a run's every step sent straight to the driver
    (`run`, see prepared.py)."""

    def __init__(self, connection: AsyncConnection, *, read_only: bool = False) -> None:
        self._connection = connection
        self.dialect: Dialect = connection.dialect
        # A read-only unit of work never commits: a write there is refused at once, as the database refuses it.
        self._batching = connection.dialect.name == "postgresql" and not read_only
        self._guard: _Guard | None = None
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

    async def _run(self, prepared: Prepared, parameters: Mapping[str, Any], *, begin: bool = True) -> Rows:
        """`begin=False`: if no statement began the transaction yet, this one goes alone, without BEGIN (the commit
        then has nothing to send)."""
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
            fetched, rowcount = await self._driver(compiled.sql, arguments, begin)
        except self.dialect.loaded_dbapi.Error as error:
            # Raised as SQLAlchemy raises it, a lost connection invalidated with its pool (errors.py: an outage).
            await self._connection.run_sync(raise_as_sqlalchemy, error, compiled.sql, arguments)
            raise  # not reached: raise_as_sqlalchemy raises
        if announced is not None:
            announced.dispatch.after_execute(announced, prepared.statement, (), parameters, {}, None)
        return Rows(compiled.rows(fetched), rowcount)

    async def later(self, write: Prepared, rows: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Insert the row (or rows), or update with the parameters, at the latest when the unit of work commits.
        Nothing may depend on its outcome before then: a refused write fails the commit."""
        rows = list(rows) if isinstance(rows, Sequence) else [rows]
        if not self._batching:
            await self._write_now(write, rows)
            return
        if isinstance(write.statement, Update):
            await self._flush_for(write.statement)  # one statement may not change a row twice: its earlier writes go
        self._pending.append((write, rows))

    async def guard(
        self, update: Prepared, parameters: Mapping[str, Any], refused: Callable[[], Awaitable[None]]
    ) -> None:
        """Update a row that the unit's other writes depend on, at the latest when the unit of work commits, first
        of what is sent with it: if it updates no row, nothing of the unit is written and `refused()` is awaited
        (it raises what that means). On SQLite, at once."""
        if not self._batching:
            if (await self.run(update, parameters)).rowcount == 0:
                await refused()
            return
        await self._flush_for(update.statement)  # a guard kept already (its table is this one's) goes first
        self._guard = _Guard(update, parameters, refused)

    async def flush(self, *, last: bool = False) -> None:
        """Send the writes kept for later: one statement (past _ROWS_TOGETHER rows, one executemany per insert).
        `last`: the commit follows, and if no statement began the transaction, a lone statement goes without BEGIN."""
        pending, self._pending = self._pending, []
        guard, self._guard = self._guard, None
        rows = sum(len(written) for _, written in pending)
        if rows > _ROWS_TOGETHER:
            if guard is not None:
                await self._guarded(guard, begin=True)
            in_order: list[tuple[Prepared, list[Mapping[str, Any]]]] = []  # a statement's rows kept together
            for write, written in pending:
                if in_order and in_order[-1][0] is write:
                    in_order[-1][1].extend(written)
                else:
                    in_order.append((write, list(written)))
            for write, written in in_order:  # in the order they were kept: a row may refer to an earlier one
                await self._write_now(write, written)
        elif guard is not None and not pending:
            await self._guarded(guard, begin=not last)
        elif guard is None and rows == 1:
            await self._run(pending[0][0], pending[0][1][0], begin=not last)
        elif pending:
            writes = tuple((write, tuple(tuple(row) for row in written)) for write, written in pending)
            parameters = {
                f"w{number}_{index}_{key}": value
                for number, (_, written) in enumerate(pending)
                for index, row in enumerate(written)
                for key, value in row.items()
            }
            if guard is not None:
                parameters |= {f"g_{key}": value for key, value in guard.parameters.items()}
            shape: Shape = ((guard.update, tuple(guard.parameters)) if guard else None, writes)
            answer = await self._run(_together(shape), parameters, begin=not last)
            if guard is not None and answer.scalar() == 0:
                await guard.refused()

    async def _guarded(self, guard: _Guard, *, begin: bool) -> None:
        if (await self._run(guard.update, guard.parameters, begin=begin)).rowcount == 0:
            await guard.refused()

    async def _write_now(self, write: Prepared, rows: Sequence[Mapping[str, Any]]) -> None:
        if len(rows) == 1:
            await self.run(write, rows[0])
        else:  # each row in turn, on the driver (executemany)
            await self._connection.execute(write.statement, rows)

    def unless_committed(self, undo: Callable[[], None]) -> None:
        """Call `undo` if the transaction ends without committing: what a repository noted in memory about rows it
        wrote (they are not stored after all)."""
        self._undo.append(undo)

    def committed(self) -> None:
        self._undo.clear()

    def discard(self) -> None:
        """Drop the writes kept for later, and undo what was noted of the unit's writes (it is rolled back)."""
        self._pending.clear()
        self._guard = None
        undo, self._undo = self._undo, []
        for step in reversed(undo):
            step()

    async def _flush_for(self, statement: Executable) -> None:
        """The kept writes sent first when the statement must see them: it touches a table they write, or it
        deletes (a delete may cascade to their rows, or remove the rows they refer to), or what it touches is
        unknown."""
        if not self._pending and self._guard is None:
            return
        written = {cast(Insert | Update, write.statement).table.name for write, _ in self._pending}  # type: ignore[union-attr]
        if self._guard is not None:
            written.add(cast(Update, self._guard.update.statement).table.name)  # type: ignore[union-attr]
        if isinstance(statement, Delete) or not (tables := _tables(statement)) or not tables.isdisjoint(written):
            await self.flush()
