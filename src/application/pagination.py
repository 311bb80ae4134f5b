"""Cursor pagination: a cursor is an opaque token that encodes the last key of a page."""

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar
from uuid import UUID

from application.errors import InvalidCursor

T = TypeVar("T")
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
_PREFIX = "v1:"
POSITION_MAX = 2**31 - 1
"""The largest message position or run event sequence number: both are stored as 32-bit integers."""


def encode_cursor(key: str) -> str:
    return base64.urlsafe_b64encode((_PREFIX + key).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidCursor("the cursor is not one this API handed out") from None
    if not raw.startswith(_PREFIX):
        raise InvalidCursor("the cursor is not one this API handed out")
    return raw[len(_PREFIX) :]


def decode_id_cursor(cursor: str | None) -> UUID | None:
    """The id a cursor of an id-ordered list points after."""
    key = decode_cursor(cursor)
    if key is None:
        return None
    try:
        return UUID(key)
    except ValueError:
        raise InvalidCursor("the cursor is not one this API handed out") from None


def decode_position_cursor(cursor: str | None) -> int | None:
    """The position a cursor of a position-ordered list points after."""
    key = decode_cursor(cursor)
    if key is None:
        return None
    # ASCII digits only: isdigit() alone also takes superscripts and other digits int() refuses.
    if not (key.isascii() and key.isdigit()) or len(key) > 10 or int(key) > POSITION_MAX:
        raise InvalidCursor("the cursor is not one this API handed out")
    return int(key)


@dataclass(frozen=True, kw_only=True)
class PageRequest:
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None


@dataclass(frozen=True, kw_only=True)
class Page(Generic[T]):
    items: Sequence[T]
    next_cursor: str | None


def page_of(rows: Sequence[T], limit: int, key: Callable[[T], str]) -> Page[T]:
    """Build a page from up to `limit + 1` rows: the extra row only tells that there is more."""
    items = rows[:limit]
    more = len(rows) > limit
    return Page(items=items, next_cursor=encode_cursor(key(items[-1])) if more and items else None)
