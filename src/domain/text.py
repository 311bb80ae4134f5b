"""Checks shared by entities for names, slugs and free text."""

import re
import unicodedata

from domain.errors import InvalidValue

SLUG_MAX = 64
_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def require_text(field: str, value: str, *, max_length: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidValue(f"{field} must be a string")
    if not allow_empty and not value.strip():
        raise InvalidValue(f"{field} must not be empty")
    if len(value) > max_length:
        raise InvalidValue(f"{field} must be at most {max_length} characters")
    if "\x00" in value:
        raise InvalidValue(f"{field} must not contain NUL characters")
    return value


def require_slug(field: str, value: str, *, max_length: int = SLUG_MAX) -> str:
    if not isinstance(value, str) or not _SLUG.match(value) or len(value) > max_length:
        raise InvalidValue(
            f"{field} must be 1-{max_length} lowercase letters, digits and single hyphens "
            f"(not at the start or end), got {value!r}"
        )
    return value


def slugify(name: str, *, max_length: int = SLUG_MAX) -> str:
    """A slug derived from a display name: 'Support Bot #2' -> 'support-bot-2'."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")
    slug = slug[:max_length].rstrip("-")
    return slug or "item"
