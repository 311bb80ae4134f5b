from datetime import UTC, datetime
from typing import Any


def utc(value: datetime | None) -> datetime | None:
    """SQLite gives back naive datetimes; everything we store is UTC."""
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def utc_required(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class Prefixed:
    """A row's columns whose labels start with a prefix, by their names without it."""

    __slots__ = ("_prefix", "_row")

    def __init__(self, row: Any, prefix: str) -> None:
        self._row, self._prefix = row, prefix

    def __getattr__(self, name: str) -> Any:
        return getattr(self._row, self._prefix + name)
