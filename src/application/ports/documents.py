"""Ports for reading uploaded files and fetching them from the web."""

from dataclasses import dataclass
from typing import Protocol

from domain.sources import TableData


@dataclass(frozen=True, kw_only=True)
class Document:
    """What a file holds, ready to be a source: text (headings as `#` lines, a paged document's pages
    separated by domain.sources.PAGE_BREAK) or a table."""

    mime_type: str
    text: str | None = None
    table: TableData | None = None


class DocumentReader(Protocol):
    async def read(self, name: str, mime_type: str | None, content: bytes) -> Document:
        """Raises UnsupportedSourceType for a kind of file it does not read, UnreadableSource for a file
        that is not what it claims or holds no text."""
        ...


@dataclass(frozen=True, kw_only=True)
class FetchedFile:
    url: str
    name: str
    mime_type: str | None
    content: bytes


class FileFetcher(Protocol):
    async def fetch(self, url: str, *, max_bytes: int) -> FetchedFile:
        """GET through the outbound guard. Raises UrlNotAllowed, SourceTooLarge past max_bytes, and
        UnreadableSource when the URL does not answer with a file."""
        ...
