from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, select, text

from domain.audit import AuditAction, AuditEvent, FieldChange
from domain.ids import ApiKeyId, OrgId
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.repositories._rows import utc_required
from infrastructure.persistence.tables import audit_events

_INSERT = insert(audit_events)
# One organization's events are written one transaction at a time (the lock is held until commit), so they
# are committed in the order of their ids: a reader paging by id never skips an event committed after its page.
_ORG_WRITE_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended('audit_events:' || :org, 0))")


def _to_entity(row: Any) -> AuditEvent:
    return AuditEvent(
        id=row.id,
        org_id=OrgId(row.org_id),
        action=AuditAction(row.action),
        object_id=row.object_id,
        actor_key_id=ApiKeyId(row.actor_key_id) if row.actor_key_id else None,
        at=utc_required(row.at),
        changes=tuple(FieldChange(field=c["field"], old=c.get("old"), new=c.get("new")) for c in row.changes),
    )


class SqlAuditEventRepository:
    """Inserts and reads only: there is no statement here that changes or removes an event."""

    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def add(self, event: AuditEvent) -> None:
        if self._conn.dialect.name == "postgresql":  # SQLite has one writer at a time already
            await self._conn.execute(_ORG_WRITE_LOCK, {"org": str(event.org_id)})
        await self._conn.execute(
            _INSERT,
            {
                "org_id": event.org_id,
                "action": event.action.value,
                "object_type": event.object_type,
                "object_id": event.object_id,
                "actor_key_id": event.actor_key_id,
                "changes": [{"field": c.field, "old": c.old, "new": c.new} for c in event.changes],
                "at": event.at,
            },
        )

    async def list(
        self,
        org_id: OrgId,
        *,
        limit: int,
        after: int | None,
        action: AuditAction | None = None,
        object_type: str | None = None,
        object_id: str | None = None,
    ) -> Sequence[AuditEvent]:
        query = select(audit_events).where(audit_events.c.org_id == org_id).order_by(audit_events.c.id).limit(limit)
        if after is not None:
            query = query.where(audit_events.c.id > after)
        if action is not None:
            query = query.where(audit_events.c.action == action.value)
        if object_type is not None:
            query = query.where(audit_events.c.object_type == object_type)
        if object_id is not None:
            query = query.where(audit_events.c.object_id == object_id)
        return [_to_entity(row) for row in await self._conn.execute(query)]
