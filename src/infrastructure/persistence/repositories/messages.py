from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from domain.ids import MessageId, OrgId, RunId, ThreadId
from domain.messages import Message, MessageRole, content_from_dicts, part_to_dict
from infrastructure.persistence.repositories._rows import utc_required
from infrastructure.persistence.tables import messages


def _to_entity(row: Any) -> Message:
    return Message(
        id=MessageId(row.id),
        org_id=OrgId(row.org_id),
        thread_id=ThreadId(row.thread_id),
        run_id=RunId(row.run_id) if row.run_id else None,
        role=MessageRole(row.role),
        content=content_from_dicts(row.content),
        position=row.position,
        created_at=utc_required(row.created_at),
    )


class SqlMessageRepository:
    def __init__(self, connection: AsyncConnection) -> None:
        self._conn = connection

    async def add(self, message: Message) -> None:
        await self._conn.execute(
            insert(messages).values(
                id=message.id,
                org_id=message.org_id,
                thread_id=message.thread_id,
                run_id=message.run_id,
                role=message.role.value,
                content=[part_to_dict(p) for p in message.content],
                position=message.position,
                created_at=message.created_at,
            )
        )

    async def list(
        self, org_id: OrgId, thread_id: ThreadId, *, limit: int, after_position: int | None
    ) -> Sequence[Message]:
        query = (
            select(messages)
            .where(messages.c.org_id == org_id, messages.c.thread_id == thread_id)
            .order_by(messages.c.position)
            .limit(limit)
        )
        if after_position is not None:
            query = query.where(messages.c.position > after_position)
        return [_to_entity(row) for row in await self._conn.execute(query)]
