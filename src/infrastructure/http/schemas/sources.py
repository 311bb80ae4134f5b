from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from application.ports.persistence import SourceSummary
from application.use_cases.mcp_operations import ImportedResource
from domain.sources import CreatedBy, Source, SourceKind


class OriginOut(BaseModel):
    type: str
    integration_id: UUID | None
    uri: str | None


class SourceSummaryOut(BaseModel):
    id: UUID
    name: str
    kind: SourceKind
    origin: OriginOut
    mime_type: str | None
    size: int
    created_by: CreatedBy
    created_at: datetime
    thread_id: UUID | None
    agent_id: UUID | None

    @classmethod
    def of(cls, source: Source | SourceSummary) -> "SourceSummaryOut":
        return cls(
            id=source.id,
            name=source.name,
            kind=source.kind,
            origin=OriginOut(**source.origin.__dict__),
            mime_type=source.mime_type,
            size=source.size,
            created_by=source.created_by,
            created_at=source.created_at,
            thread_id=source.thread_id,
            agent_id=source.agent_id,
        )


class SourceOut(SourceSummaryOut):
    text: str | None
    data: dict[str, Any] | None
    content_url: str

    @classmethod
    def full(cls, source: Source) -> "SourceOut":
        data = (
            {"headers": list(source.data.headers), "rows": [list(r) for r in source.data.rows]} if source.data else None
        )
        return cls(
            **SourceSummaryOut.of(source).model_dump(),
            text=source.text,
            data=data,
            content_url=f"/v1/sources/{source.id}/content",
        )


class ImportedResourceOut(BaseModel):
    sources: list[SourceSummaryOut]
    preview: str

    @classmethod
    def of(cls, imported: ImportedResource) -> "ImportedResourceOut":
        return cls(sources=[SourceSummaryOut.of(s) for s in imported.sources], preview=imported.preview)
