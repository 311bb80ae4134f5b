"""Slugs the server derives from names: a taken one is numbered until it is free, never a conflict."""

from collections.abc import Awaitable, Callable
from typing import TypeVar

from application.errors import SlugTaken
from domain.text import SLUG_MAX, numbered_slug, slugify

T = TypeVar("T")
ATTEMPTS = 100


async def create_with_slug(
    create: Callable[[str], Awaitable[T]], *, slug: str | None, name: str, max_length: int = SLUG_MAX
) -> T:
    """`create(slug)` with the slug the client gave (taken: SlugTaken), or with one derived from the name:
    'support', then 'support-2', 'support-3'... until one is free. Each attempt is its own transaction."""
    if slug is not None:
        return await create(slug)
    base = slugify(name, max_length=max_length)
    for n in range(1, ATTEMPTS + 1):
        try:
            return await create(base if n == 1 else numbered_slug(base, n, max_length=max_length))
        except SlugTaken:
            continue
    raise SlugTaken(f"the slugs derived from {name!r} are all taken; give a slug")
