from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import computed_field, field_validator

from domain.sources import CreatedBy, SourceKind, TableData
from infrastructure.http.schemas.common import ResponseModel


class OriginOut(ResponseModel):
    type: str
    integration_id: UUID | None
    uri: str | None


class SourceSummaryOut(ResponseModel):
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


class SourceOut(SourceSummaryOut):
    text: str | None
    data: dict[str, Any] | None

    @computed_field  # type: ignore[prop-decorator]
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
    sources: list[SourceSummaryOut]
    preview: str
