"""Sources: content imported into a thread or attached to an agent (an MCP resource, an upload, a web
page), and the passages a source is split into for retrieval."""

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from domain.errors import InvalidValue
from domain.ids import AgentId, IntegrationId, OrgId, SourceId, ThreadId
from domain.text import require_text

SOURCE_NAME_MAX = 500
PREVIEW_CHARS = 500


class SourceKind(StrEnum):
    """What a source holds: text, data (a table) or a blob."""

    TEXT = "text"
    DATA = "data"
    BLOB = "blob"


class CreatedBy(StrEnum):
    """Who imported a source."""

    USER = "user"
    LLM = "llm"
    SYSTEM = "system"


@dataclass(frozen=True, kw_only=True)
class SourceOrigin:
    """Where the content came from: an MCP resource (integration + uri), an upload, the web."""

    type: str
    integration_id: IntegrationId | None = None
    uri: str | None = None


@dataclass(frozen=True, kw_only=True)
class TableData:
    """Tabular content (e.g. CSV): a header row and the rows below it."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, kw_only=True)
class Source:
    id: SourceId
    org_id: OrgId
    kind: SourceKind
    name: str
    origin: SourceOrigin
    mime_type: str | None
    size: int
    created_by: CreatedBy
    created_at: datetime
    thread_id: ThreadId | None = None
    agent_id: AgentId | None = None
    text: str | None = None
    data: TableData | None = None
    blob: bytes | None = field(default=None, repr=False)
    content_hash: str | None = None
    """sha256 of the content as uploaded, to find the same file uploaded twice."""

    def __post_init__(self) -> None:
        require_text("name", self.name, max_length=SOURCE_NAME_MAX)
        if (self.thread_id is None) == (self.agent_id is None):
            raise InvalidValue("a source belongs to exactly one thread or one agent")
        expected = {SourceKind.TEXT: self.text, SourceKind.DATA: self.data, SourceKind.BLOB: self.blob}
        if expected[self.kind] is None:
            raise InvalidValue(f"a {self.kind.value} source needs its content")

    @property
    def readable_text(self) -> str | None:
        """What a model can read of this source (blobs are stored, not sent to the model)."""
        if self.text is not None:
            return self.text
        if self.data is not None:
            lines = [",".join(self.data.headers), *(",".join(row) for row in self.data.rows)]
            return "\n".join(lines)
        return None

    def preview(self, limit: int = PREVIEW_CHARS) -> str:
        text = self.readable_text
        if text is None:
            return f"[binary content, {self.mime_type or 'unknown type'}, {self.size} bytes]"
        return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters]"


def table_from_rows(rows: Sequence[Sequence[str]]) -> TableData:
    if not rows:
        raise InvalidValue("a table needs at least a header row")
    return TableData(headers=tuple(rows[0]), rows=tuple(tuple(r) for r in rows[1:]))


def content_hash(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


PDF_MIME_TYPE = "application/pdf"
PAGE_BREAK = "\f"
"""Separates the pages of a paged document's text (a PDF's), so its passages keep their page numbers."""
PASSAGE_CHARS = 1000
"""About how long a passage is: paragraphs are gathered up to this, longer ones cut at sentences."""
TABLE_ROWS_PER_PASSAGE = 10


@dataclass(frozen=True, kw_only=True)
class Passage:
    """A piece of a source small enough to cite, with where it is in the source."""

    position: int
    """Its order in the source, from 0"""
    text: str
    heading: str | None = None
    """The heading it is under (nested headings joined with ' > ')"""
    page: int | None = None
    """Its page, from 1, for paged documents"""
    row: int | None = None
    """The first table row it holds, from 1 (the header row not counted)"""

    @property
    def location(self) -> str:
        parts = []
        if self.page is not None:
            parts.append(f"page {self.page}")
        if self.heading:
            parts.append(self.heading)
        if self.row is not None:
            parts.append(f"row {self.row}")
        return ", ".join(parts) or f"passage {self.position + 1}"


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def passages_of(source: Source) -> list[Passage]:
    """How a source is split for retrieval: tables by rows, paged text by page, other text by its
    headings and paragraphs. Blobs have no passages."""
    if source.data is not None:
        return _number(_table_passages(source.data))
    if source.text is None:
        return []
    if source.mime_type == PDF_MIME_TYPE or PAGE_BREAK in source.text:
        pages = source.text.split(PAGE_BREAK)
        return _number(p for n, page in enumerate(pages, start=1) for p in _text_passages(page, page=n))
    return _number(_text_passages(source.text))


def _number(passages: Iterator[Passage] | list[Passage]) -> list[Passage]:
    return [Passage(position=n, text=p.text, heading=p.heading, page=p.page, row=p.row) for n, p in enumerate(passages)]


def _table_passages(table: TableData) -> Iterator[Passage]:
    for start in range(0, len(table.rows), TABLE_ROWS_PER_PASSAGE):
        lines = []
        for row in table.rows[start : start + TABLE_ROWS_PER_PASSAGE]:
            cells = [f"{h}: {v}" for h, v in zip(table.headers, row, strict=False) if v.strip()]
            lines.append("; ".join(cells) if table.headers else ", ".join(row))
        yield Passage(position=0, text="\n".join(lines), row=start + 1)


def _text_passages(text: str, *, page: int | None = None) -> Iterator[Passage]:
    headings: list[str] = []
    paragraphs: list[str] = []

    def flush() -> Iterator[Passage]:
        heading = " > ".join(headings) or None
        for chunk in _gather(paragraphs):
            yield Passage(position=0, text=chunk, heading=heading, page=page)
        paragraphs.clear()

    current: list[str] = []
    for line in [*text.splitlines(), ""]:
        match = _HEADING.match(line.strip())
        if match or not line.strip():
            if current:
                paragraphs.append(" ".join(current))
                current = []
            if match:
                yield from flush()
                level = len(match.group(1))
                del headings[level - 1 :]
                headings.extend([""] * (level - 1 - len(headings)))
                headings.append(match.group(2))
                headings[:] = [h for h in headings if h]
            continue
        current.append(line.strip())
    yield from flush()


def _gather(paragraphs: Sequence[str]) -> Iterator[str]:
    """Paragraphs joined up to PASSAGE_CHARS; a longer paragraph cut between sentences."""
    pieces = [piece for p in paragraphs for piece in _cut(p)]
    current = ""
    for piece in pieces:
        if current and len(current) + len(piece) + 2 > PASSAGE_CHARS:
            yield current
            current = ""
        current = f"{current}\n\n{piece}" if current else piece
    if current:
        yield current


def _cut(paragraph: str) -> Iterator[str]:
    if len(paragraph) <= PASSAGE_CHARS:
        yield paragraph
        return
    current = ""
    for sentence in _SENTENCE_END.split(paragraph):
        while len(sentence) > PASSAGE_CHARS:  # a "sentence" without stops: cut it by length
            if current:
                yield current
                current = ""
            yield sentence[:PASSAGE_CHARS]
            sentence = sentence[PASSAGE_CHARS:]
        if current and len(current) + len(sentence) + 1 > PASSAGE_CHARS:
            yield current
            current = ""
        current = f"{current} {sentence}" if current else sentence
    if current:
        yield current
