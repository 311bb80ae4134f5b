"""The statements a run executes at every step, sent straight to the driver.

Through SQLAlchemy a statement costs about 100 us of CPU beyond the driver's (its execution context, a greenlet
switch, a result with its metadata): more than SQLite takes to run it, and twice what asyncpg takes to send it.
A `Prepared` statement is compiled by SQLAlchemy once per dialect and set of parameter names, with the bind and
result processors of its columns' types; each use only converts its values and runs the SQL on the transaction's
driver connection. Same SQL, same values, same transaction (or none: a unit of work's one statement may go alone,
see batching.py), same errors (handled as SQLAlchemy handles them, a
lost connection invalidated, so errors.py reads them alike); SQLAlchemy's statement events are announced too (what
listens to them sees these).

Only statements whose values all come from their parameters qualify: no value a column default computes in
Python, no expanding IN list; compiling any other raises at once.
"""

import operator
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn, cast

from sqlalchemy.engine import Connection
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import ClauseElement, Executable
from sqlalchemy.sql.compiler import SQLCompiler

from infrastructure.persistence.sqlite_driver import run_here

_COUNT = re.compile(r"(?:SELECT|UPDATE|DELETE|INSERT \d+) (\d+)")
"""The rows a statement touched, from PostgreSQL's command tag."""

Processor = Callable[[Any], Any] | None


class Row(tuple[Any, ...]):
    """A result row: by position, and by column name as an attribute (as SQLAlchemy's rows)."""

    __slots__ = ()


def _row_type(keys: Sequence[str]) -> type[Row]:
    attributes: dict[str, Any] = {"__slots__": (), "_fields": tuple(keys)}
    for index, key in enumerate(keys):
        attributes[key] = property(operator.itemgetter(index))
    return type("Row", (Row,), attributes)


class Rows:
    """What a prepared statement answered: its rows (processed as SQLAlchemy would) and the rows it touched."""

    __slots__ = ("rowcount", "rows")

    def __init__(self, rows: Sequence[Any], rowcount: int) -> None:
        self.rows, self.rowcount = rows, rowcount

    def first(self) -> Any:
        return self.rows[0] if self.rows else None

    def scalar(self) -> Any:
        return self.rows[0][0] if self.rows else None

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows)


class _Compiled:
    """One statement compiled for one dialect and one set of parameter names."""

    __slots__ = ("_binds", "_compiled", "_names", "_results", "_row", "sql")

    def __init__(self, statement: Executable, dialect: Dialect, keys: Sequence[str]) -> None:
        compiled = cast(ClauseElement, statement).compile(dialect=dialect, column_keys=list(keys))
        if not isinstance(compiled, SQLCompiler) or not compiled.positional:
            raise ValueError(f"a prepared statement is compiled for a positional driver: {compiled}")
        if (
            compiled.insert_prefetch
            or compiled.update_prefetch
            or compiled.post_compile_params
            or compiled.literal_execute_params
        ):
            raise ValueError(f"not a statement whose values all come from its parameters: {compiled}")
        self._compiled = compiled
        self.sql = compiled.string
        processors = compiled._bind_processors
        self._names = tuple(compiled.positiontup or ())
        self._binds = tuple(cast(Processor, processors.get(name)) for name in self._names)
        columns = compiled._result_columns
        self._row = _row_type([column.keyname for column in columns]) if columns else None
        results = tuple(column.type._cached_result_processor(dialect, None) for column in columns)
        self._results: tuple[Processor, ...] | None = results if any(results) else None

    def arguments(self, parameters: Mapping[str, Any]) -> list[Any]:
        values = self._compiled.construct_params(parameters, escape_names=False)  # as positiontup names them
        return [
            values[name] if bind is None else bind(values[name])
            for name, bind in zip(self._names, self._binds, strict=True)
        ]

    def rows(self, fetched: Sequence[Sequence[Any]]) -> list[Row]:
        make = self._row
        if make is None or not fetched:
            return []
        results = self._results
        if results is None:
            return [make(row) for row in fetched]
        return [
            make(value if result is None else result(value) for value, result in zip(row, results, strict=True))
            for row in fetched
        ]


class Prepared:
    """A statement executed often (see the module's docstring): `UnitConnection.run(prepared, parameters)`."""

    __slots__ = ("_compiled", "statement")

    def __init__(self, statement: Executable) -> None:
        self.statement = statement
        self._compiled: dict[tuple[type[Dialect], Any, tuple[str, ...]], _Compiled] = {}

    def compiled(self, dialect: Dialect, keys: tuple[str, ...]) -> _Compiled:
        """For one kind of dialect and server version (engines made as engine.py makes them differ in nothing
        else that compiling or converting reads), and one set of parameter names."""
        key = (type(dialect), dialect.server_version_info, keys)
        found = self._compiled.get(key)
        if found is None:
            found = self._compiled[key] = _Compiled(self.statement, dialect, keys)
        return found


Driver = Callable[[str, list[Any], bool], Awaitable[tuple[Sequence[Any], int]]]


async def _through_sqlalchemy(_sql: str, _arguments: list[Any], _begin: bool) -> tuple[Sequence[Any], int]:
    raise NotImplementedError  # a marker: see driver_of


THROUGH_SQLALCHEMY: Driver = _through_sqlalchemy
"""A driver this module does not know: its statements go through SQLAlchemy as any other."""


async def driver_of(connection: AsyncConnection) -> Driver:
    """How the transaction's driver connection runs one statement: `await driver(sql, arguments, begin)` gives the
    rows and the count of rows touched, or raises the driver's error as its DBAPI adapter raises it. With `begin`
    false and no statement sent in the transaction yet, the statement goes alone, outside a transaction (it is
    the whole of it: the commit has nothing to send)."""
    dialect = connection.dialect
    if dialect.driver not in ("aiosqlite", "asyncpg"):
        return THROUGH_SQLALCHEMY
    adapted = (await connection.get_raw_connection()).dbapi_connection
    if dialect.name == "sqlite":

        async def on_sqlite(sql: str, arguments: list[Any], _begin: bool) -> tuple[Sequence[Any], int]:
            return run_here(adapted, sql, arguments)

        return on_sqlite

    async def on_asyncpg(sql: str, arguments: list[Any], begin: bool) -> tuple[Sequence[Any], int]:
        # As SQLAlchemy's asyncpg adapter runs a statement: its transaction begun with the first one, the
        # statement prepared once per connection, its command tag read for the rows it touched.
        async with adapted._execute_mutex:  # type: ignore[union-attr]
            if begin and adapted._transaction is None:  # type: ignore[union-attr]
                await adapted._start_transaction()  # type: ignore[union-attr]
            try:
                statement, _ = await adapted._prepare(sql, dialect._invalidate_schema_cache_asof)  # type: ignore[union-attr, attr-defined]
                rows = await statement.fetch(*arguments)
                tag = statement.get_statusmsg()
            except Exception as error:
                adapted._handle_exception(error)  # type: ignore[union-attr]
        counted = _COUNT.match(tag or "")
        return rows, int(counted.group(1)) if counted else -1

    return on_asyncpg


def raise_as_sqlalchemy(connection: Connection, error: Exception, sql: str, arguments: list[Any]) -> NoReturn:
    """The driver's error raised as SQLAlchemy raises it for a statement it executed (IntegrityError,
    OperationalError, ...; a lost connection invalidated, with the pool); run in SQLAlchemy's greenlet
    (`AsyncConnection.run_sync`)."""
    connection._handle_dbapi_exception(error, sql, arguments, None, None)
    raise error  # not reached: SQLAlchemy raises its own
