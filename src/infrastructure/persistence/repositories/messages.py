from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, insert, select

from domain.ids import MessageId, OrgId, RunId, ThreadId
from domain.messages import Message, MessageRole, content_from_dicts, part_to_dict
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.prepared import Prepared
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


_INSERT = Prepared(insert(messages))
_LIST_ALL = (
    select(messages)
    .where(messages.c.org_id == bindparam("p_org"), messages.c.thread_id == bindparam("p_thread"))
    .order_by(messages.c.position)
    .limit(bindparam("p_limit"))
)
_LIST = Prepared(_LIST_ALL)
_LIST_AFTER = Prepared(_LIST_ALL.where(messages.c.position > bindparam("p_after")))
_LAST = Prepared(
    select(messages)
    .where(messages.c.org_id == bindparam("p_org"), messages.c.thread_id == bindparam("p_thread"))
    .order_by(messages.c.position.desc())
    .limit(1)
)


class SqlMessageRepository:
    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def add(self, message: Message) -> None:
        await self._conn.later(
            _INSERT,
            {
                "id": message.id,
                "org_id": message.org_id,
                "thread_id": message.thread_id,
                "run_id": message.run_id,
                "role": message.role.value,
                "content": [part_to_dict(p) for p in message.content],
                "position": message.position,
                "created_at": message.created_at,
            },
        )

    async def last(self, org_id: OrgId, thread_id: ThreadId) -> Message | None:
        row = (await self._conn.run(_LAST, {"p_org": org_id, "p_thread": thread_id})).first()
        return _to_entity(row) if row else None

    async def list(
        self, org_id: OrgId, thread_id: ThreadId, *, limit: int, after_position: int | None
    ) -> Sequence[Message]:
        params = {"p_org": org_id, "p_thread": thread_id, "p_limit": limit, "p_after": after_position}
        query = _LIST if after_position is None else _LIST_AFTER
        return [_to_entity(row) for row in await self._conn.run(query, params)]
