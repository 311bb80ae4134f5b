from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, insert, select

from application.ports.persistence import SourceSummary
from domain.ids import AgentId, IntegrationId, OrgId, SourceId, ThreadId
from domain.sources import CreatedBy, Source, SourceKind, SourceOrigin, TableData
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.repositories._rows import utc_required
from infrastructure.persistence.tables import source_passages
from infrastructure.persistence.tables import sources as table

_SUMMARY_COLUMNS = [c for c in table.c if c.name not in ("text", "data", "blob", "content_hash")]


def _origin(row: Any) -> SourceOrigin:
    return SourceOrigin(
        type=row.origin_type,
        integration_id=IntegrationId(row.origin_integration_id) if row.origin_integration_id else None,
        uri=row.origin_uri,
    )


def _summary(row: Any) -> SourceSummary:
    return SourceSummary(
        id=SourceId(row.id),
        kind=SourceKind(row.kind),
        name=row.name,
        origin=_origin(row),
        mime_type=row.mime_type,
        size=row.size,
        created_by=CreatedBy(row.created_by),
        created_at=utc_required(row.created_at),
        thread_id=ThreadId(row.thread_id) if row.thread_id else None,
        agent_id=AgentId(row.agent_id) if row.agent_id else None,
    )


def _to_entity(row: Any) -> Source:
    data = (
        TableData(headers=tuple(row.data["headers"]), rows=tuple(tuple(r) for r in row.data["rows"]))
        if row.data
        else None
    )
    return Source(
        id=SourceId(row.id),
        org_id=OrgId(row.org_id),
        thread_id=ThreadId(row.thread_id) if row.thread_id else None,
        agent_id=AgentId(row.agent_id) if row.agent_id else None,
        kind=SourceKind(row.kind),
        name=row.name,
        origin=_origin(row),
        mime_type=row.mime_type,
        size=row.size,
        created_by=CreatedBy(row.created_by),
        created_at=utc_required(row.created_at),
        text=row.text,
        data=data,
        blob=row.blob,
        content_hash=row.content_hash,
    )


class SqlSourceRepository:
    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def add(self, source: Source) -> None:
        data = (
            {"headers": list(source.data.headers), "rows": [list(r) for r in source.data.rows]} if source.data else None
        )
        await self._conn.execute(
            insert(table).values(
                id=source.id,
                org_id=source.org_id,
                thread_id=source.thread_id,
                agent_id=source.agent_id,
                kind=source.kind.value,
                name=source.name,
                origin_type=source.origin.type,
                origin_integration_id=source.origin.integration_id,
                origin_uri=source.origin.uri,
                mime_type=source.mime_type,
                size=source.size,
                created_by=source.created_by.value,
                text=source.text,
                data=data,
                blob=source.blob,
                content_hash=source.content_hash,
                created_at=source.created_at,
            )
        )

    async def get(self, org_id: OrgId, source_id: SourceId) -> Source | None:
        row = (await self._conn.execute(select(table).where(table.c.org_id == org_id, table.c.id == source_id))).first()
        return _to_entity(row) if row else None

    async def list(
        self,
        org_id: OrgId,
        *,
        thread_id: ThreadId | None = None,
        agent_id: AgentId | None = None,
        limit: int,
        after: SourceId | None,
    ) -> Sequence[SourceSummary]:
        query = select(*_SUMMARY_COLUMNS).where(table.c.org_id == org_id).order_by(table.c.id).limit(limit)
        if thread_id is not None:
            query = query.where(table.c.thread_id == thread_id)
        if agent_id is not None:
            query = query.where(table.c.agent_id == agent_id)
        if after is not None:
            query = query.where(table.c.id > after)
        return [_summary(row) for row in await self._conn.execute(query)]

    async def find_by_hash(
        self, org_id: OrgId, content_hash: str, *, thread_id: ThreadId | None, agent_id: AgentId | None
    ) -> SourceSummary | None:
        query = select(*_SUMMARY_COLUMNS).where(
            table.c.org_id == org_id,
            table.c.content_hash == content_hash,
            table.c.thread_id == thread_id if thread_id is not None else table.c.agent_id == agent_id,
        )
        row = (await self._conn.execute(query.limit(1))).first()
        return _summary(row) if row else None

    async def delete(self, org_id: OrgId, source_id: SourceId) -> bool:
        # Passages first and explicitly, so the full-text index's delete trigger sees each one.
        await self._conn.execute(
            delete(source_passages).where(source_passages.c.org_id == org_id, source_passages.c.source_id == source_id)
        )
        result = await self._conn.execute(delete(table).where(table.c.org_id == org_id, table.c.id == source_id))
        return bool(result.rowcount)
