"""Reading which constraint a database refused, on PostgreSQL and SQLite alike."""

import re

from sqlalchemy import Table, UniqueConstraint
from sqlalchemy.exc import IntegrityError

_SQLITE_UNIQUE = re.compile(r"UNIQUE constraint failed: (.+)")


def violated_unique(error: IntegrityError, table: Table) -> str | None:
    """The name of the unique constraint of `table` that `error` reports, if it is one."""
    original = error.orig
    name = getattr(original, "constraint_name", None) or getattr(
        getattr(original, "__cause__", None), "constraint_name", None
    )
    if name:
        return str(name)
    match = _SQLITE_UNIQUE.search(str(original))
    if not match:
        return None
    columns = {part.strip().split(".", 1)[-1] for part in match.group(1).split(",")}
    for constraint in table.constraints:
        if isinstance(constraint, UniqueConstraint) and {c.name for c in constraint.columns} == columns:
            return str(constraint.name)
    for column in table.columns:
        if column.unique and {column.name} == columns:
            return f"uq_{table.name}_{column.name}"
    return None
