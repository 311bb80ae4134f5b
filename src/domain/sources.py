"""Sources: content imported into a thread or attached to an agent (e.g. an MCP resource)."""

from collections.abc import Sequence
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
