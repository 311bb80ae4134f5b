"""Database errors in the application's words, on PostgreSQL and SQLite alike.

A refused constraint becomes the domain error it means (a taken slug, a used idempotency key), an outage
`StorageUnavailable`; the unit of work translates whatever leaves a transaction, repositories translate
where they know the value the error should name.
"""

import logging
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from sqlalchemy import PrimaryKeyConstraint, UniqueConstraint
from sqlalchemy.exc import (
    DBAPIError,
    DisconnectionError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout

from application.errors import Conflict, IdempotencyConflict, SlugTaken, StorageUnavailable, ThreadBusy
from domain.errors import DomainError
from infrastructure.persistence.tables import UNFINISHED_RUN_OF_THREAD, metadata

logger = logging.getLogger(__name__)

REFUSALS: Mapping[str, Callable[[str], DomainError]] = {
    "uq_organizations_slug": lambda slug: SlugTaken(f"an organization with slug {slug!r} already exists"),
    "uq_agents_org_id_slug": lambda slug: SlugTaken(f"an agent with slug {slug!r} already exists in this organization"),
    "uq_mcp_integrations_org_id_slug": lambda slug: SlugTaken(
        f"an integration with slug {slug!r} already exists in this organization"
    ),
    "pk_prompt_templates": lambda name: SlugTaken(f"a prompt template named {name!r} already exists"),
    "uq_runs_org_id_idempotency_key": lambda _key: IdempotencyConflict("a run with this idempotency key exists"),
    UNFINISHED_RUN_OF_THREAD: lambda _: ThreadBusy("the thread already has a run that is not finished"),
    "uq_messages_thread_id_position": lambda _: Conflict(
        "another message was added to the thread at the same moment; try again"
    ),
}
"""Constraint name -> the domain error its violation means, given the value the caller wrote."""

CLASHED = "the change clashes with one made at the same moment (an object it refers to was deleted?); try again"
UNAVAILABLE = "the database is unavailable; try again shortly"

_OUTAGES = (OperationalError, InterfaceError, DisconnectionError, PoolTimeout, OSError)
"""Connections refused, lost or timed out (OSError covers the drivers' own socket errors and timeouts)."""
_OUTAGE_SQLSTATES = ("08", "25", "28", "3D", "40", "53", "55", "57", "58")
"""PostgreSQL error classes that are about the server's state, not the statement: connection, transaction
state (read-only after a failover), authorization, missing database, serialization and deadlock,
insufficient resources, locks, operator intervention (shutdown, statement timeout), system errors."""
_SQLITE_UNIQUE = re.compile(r"UNIQUE constraint failed: (.+)")


def translated(error: BaseException, value: str = "") -> DomainError | None:
    """The domain error a database error means, or None when it is not one (a bug: left as it is)."""
    if isinstance(error, IntegrityError):
        return refused(error, value)
    if _is_outage(error):
        logger.warning("database unavailable: %s", _describe(error))
        return StorageUnavailable(UNAVAILABLE)
    return None


DATABASE_ERRORS = (SQLAlchemyError, OSError)
"""What the engine and the drivers raise (OSError: connections refused, reset or timed out)."""


@contextmanager
def translating() -> Iterator[None]:
    """Database errors raised inside, in the application's words; one that means nothing to it (a bug) is left
    as it is."""
    try:
        yield
    except DATABASE_ERRORS as error:
        meaning = translated(error)
        if meaning is None:
            raise
        raise meaning from error


def refused(error: IntegrityError, value: str = "") -> DomainError:
    """The domain error a violated constraint means; a clash with a concurrent change when none is known."""
    name = violated_constraint(error)
    make = REFUSALS.get(name or "")
    if make is not None:
        return make(value)
    logger.warning("database refused a change", extra={"constraint": name or "unknown"})
    return Conflict(CLASHED)


def violated_constraint(error: IntegrityError) -> str | None:
    """The name of the constraint `error` reports, if the driver tells (PostgreSQL) or it can be read back
    from the columns it names (SQLite, for unique and primary keys and unique indexes)."""
    original = error.orig
    name = getattr(original, "constraint_name", None) or getattr(
        getattr(original, "__cause__", None), "constraint_name", None
    )
    if name:
        return str(name)
    match = _SQLITE_UNIQUE.search(str(original))
    if not match:
        return None
    qualified = [part.strip().split(".", 1) for part in match.group(1).split(",")]
    table = metadata.tables.get(qualified[0][0])
    if table is None:
        return None
    columns = {parts[-1] for parts in qualified}
    for constraint in table.constraints:
        keys = isinstance(constraint, UniqueConstraint | PrimaryKeyConstraint)
        if keys and set(constraint.columns.keys()) == columns:
            return str(constraint.name)
    for index in table.indexes:  # a unique index (partial ones included: SQLite names their columns alike)
        if index.unique and set(index.columns.keys()) == columns:
            return str(index.name)
    return None


def _is_outage(error: BaseException) -> bool:
    if isinstance(error, _OUTAGES):
        return True
    if not isinstance(error, DBAPIError):
        return False
    sqlstate = getattr(error.orig, "sqlstate", None)
    return error.connection_invalidated or (isinstance(sqlstate, str) and sqlstate[:2] in _OUTAGE_SQLSTATES)


def _describe(error: BaseException) -> str:
    original = error.orig if isinstance(error, DBAPIError) else error
    return f"{type(original).__name__}: {str(original).splitlines()[0] if str(original) else ''}"
