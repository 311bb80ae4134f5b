from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import computed_field, field_validator

from application.retrieval import EmbeddingStatus, SearchMode
from domain.sources import CreatedBy, SourceKind, TableData
from infrastructure.http.schemas.common import ResponseModel


class OriginOut(ResponseModel):
    """Where a source came from."""

    type: str
    """`mcp_resource`, `upload` or `web`"""
    integration_id: UUID | None
    """The MCP integration it was read from"""
    uri: str | None
    """The resource's URI or the page's URL"""


class SourceSummaryOut(ResponseModel):
    """An imported source, without its content."""

    id: UUID
    """The source's id"""
    name: str
    """Its name"""
    kind: SourceKind
    """`text`, `data` (a table) or `blob`"""
    origin: OriginOut
    """Where it came from"""
    mime_type: str | None
    """Its content's mime type, when known"""
    size: int
    """Its content's size in bytes"""
    created_by: CreatedBy
    """Who imported it: `user`, `llm` or `system`"""
    created_at: datetime
    """When it was imported"""
    thread_id: UUID | None
    """The thread it belongs to, if any"""
    agent_id: UUID | None
    """The agent it belongs to, if any"""


class IndexingOut(ResponseModel):
    """How far a source is indexed: its passages are searchable by their words at once; with embeddings on,
    by their meaning too once embedded (in the background)."""

    passages: int
    """How many passages it was split into"""
    embeddings: EmbeddingStatus
    """`off` (no embeddings model configured), `pending`, `ready`, or `failed` (retried; see `error`)"""
    embedded: int
    """How many of its passages are embedded"""
    error: str | None
    """Why embedding its passages last failed, if it did"""


class SourceOut(SourceSummaryOut):
    """An imported source with its text or table, and how far it is indexed."""

    text: str | None
    """The text, for text sources"""
    data: dict[str, Any] | None
    """The table (`headers`, `rows`), for data sources"""
    indexing: IndexingOut | None = None
    """How far it is indexed for retrieval"""

    @computed_field(description="Where to download its raw content")  # type: ignore[prop-decorator]
    @property
    def content_url(self) -> str:
        return f"/v1/sources/{self.id}/content"

    @field_validator("data", mode="before")
    @classmethod
    def _table(cls, data: TableData | dict[str, Any] | None) -> dict[str, Any] | None:
        if isinstance(data, TableData):
            return {"headers": list(data.headers), "rows": [list(r) for r in data.rows]}
        return data


class ImportedResourceOut(ResponseModel):
    """A resource imported as sources of a thread."""

    sources: list[SourceSummaryOut]
    """The sources created"""
    preview: str
    """The beginning of the imported text"""


class UploadedSourceOut(ResponseModel):
    """A source uploaded (or re-indexed) and the passages it was split into."""

    source: SourceSummaryOut
    """The source"""
    passages: int
    """How many passages it was split into for retrieval"""
    indexing: IndexingOut
    """How far it is indexed (embeddings follow in the background when they are on)"""


class PassageOut(ResponseModel):
    """A passage of a source, with where it is in the source."""

    position: int
    """Its order in the source, from 0"""
    text: str
    """Its text"""
    heading: str | None
    """The heading it is under (nested headings joined with ' > ')"""
    page: int | None
    """Its page, from 1, in a PDF"""
    row: int | None
    """The first table row it holds, from 1, in a table"""
    location: str
    """Where it is, for people: `page 3`, a heading, `row 21`"""


class PassageHitOut(ResponseModel):
    """A passage that answers a search, best first."""

    source_id: UUID
    """The source it comes from"""
    source_name: str
    """That source's name"""
    passage: PassageOut
    """The passage"""
    snippet: str
    """Its words around the query's terms, the terms in **bold** (a passage found by its meaning alone: its
    opening)"""
    score: float
    """Its relevance: higher is better, comparable within one search only"""


class SearchResultsOut(ResponseModel):
    """The passages that best answer a search."""

    data: list[PassageHitOut]
    """The passages, best first"""
    mode: SearchMode
    """`full_text`, or `hybrid` (full text and meaning, merged by reciprocal rank fusion) with embeddings on"""
    note: str | None = None
    """Why a hybrid search fell back to full text, if it did"""
