from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, delete, func, insert, literal_column, select, update

from application.ports.persistence import ThreadToRun, UnfinishedRun
from domain.ids import AgentId, OrgId, RunId, ThreadId
from domain.runs import RunStatus
from domain.threads import Thread
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.prepared import Prepared
from infrastructure.persistence.repositories._rows import utc_required
from infrastructure.persistence.repositories.agents import JOINED_AGENT, joined_agent
from infrastructure.persistence.tables import agents, is_unfinished, runs, threads


def _unfinished(row: Any) -> UnfinishedRun | None:
    if row is None or row.unfinished_run_id is None:
        return None
    return UnfinishedRun(id=RunId(row.unfinished_run_id), status=RunStatus(row.unfinished_run_status))


def _to_entity(row: Any) -> Thread:
    return Thread(
        id=ThreadId(row.id),
        org_id=OrgId(row.org_id),
        agent_id=AgentId(row.agent_id) if row.agent_id else None,
        title=row.title,
        metadata=dict(row.metadata),
        message_count=row.message_count,
        created_at=utc_required(row.created_at),
        updated_at=utc_required(row.updated_at),
    )


# The statements a run uses at every step: compiled once, sent straight to the driver (prepared.py).
_WHERE = (threads.c.org_id == bindparam("p_org"), threads.c.id == bindparam("p_id"))
_GET = Prepared(select(threads).where(*_WHERE))
_GET_FOR_UPDATE = Prepared(select(threads).where(*_WHERE).with_for_update())
_UNFINISHED = runs.alias("unfinished")
_UNFINISHED_STATUS = is_unfinished(_UNFINISHED.c.status)
_SEEN = threads.alias("seen")
_AS_SEEN = (
    literal_column("threads.xmin")
    == select(literal_column("seen.xmin")).where(_SEEN.c.id == threads.c.id).scalar_subquery()
).label("as_seen")
"""PostgreSQL: whether the thread's row locked is the version the statement's snapshot saw. When a transaction
changed it meanwhile (this statement waited for its lock), the runs read beside it are as they were before that
transaction committed."""


def _to_run(*beside: ColumnElement[Any]) -> Prepared:
    """The thread locked, its agent and its unfinished run (one at most: an index), in one statement."""
    return Prepared(
        select(
            threads,
            *JOINED_AGENT,
            _UNFINISHED.c.id.label("unfinished_run_id"),
            _UNFINISHED.c.status.label("unfinished_run_status"),
            *beside,
        )
        .select_from(
            threads.outerjoin(
                agents,
                and_(
                    agents.c.org_id == threads.c.org_id,
                    agents.c.id == func.coalesce(bindparam("p_agent", type_=agents.c.id.type), threads.c.agent_id),
                ),
            ).outerjoin(_UNFINISHED, and_(_UNFINISHED.c.thread_id == threads.c.id, _UNFINISHED_STATUS))
        )
        .where(*_WHERE)
        .with_for_update(of=threads)
    )


_GET_TO_RUN = _to_run()
"""SQLite: a writing transaction holds the database's write lock from its BEGIN, so what it reads is current."""
_GET_TO_RUN_AS_SEEN = _to_run(_AS_SEEN)
_UNFINISHED_OF_THREAD = Prepared(
    select(_UNFINISHED.c.id.label("unfinished_run_id"), _UNFINISHED.c.status.label("unfinished_run_status"))
    .where(_UNFINISHED.c.org_id == bindparam("p_org"), _UNFINISHED.c.thread_id == bindparam("p_id"), _UNFINISHED_STATUS)
    .limit(1)
)
_SAVE = Prepared(update(threads).where(*_WHERE))
_COUNTED = Prepared(
    update(threads).where(*_WHERE).values(message_count=bindparam("p_count"), updated_at=bindparam("p_now"))
)


class SqlThreadRepository:
    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def add(self, thread: Thread) -> None:
        await self._conn.execute(
            insert(threads).values(
                id=thread.id,
                org_id=thread.org_id,
                agent_id=thread.agent_id,
                title=thread.title,
                metadata=thread.metadata,
                message_count=thread.message_count,
                created_at=thread.created_at,
                updated_at=thread.updated_at,
            )
        )

    async def get(self, org_id: OrgId, thread_id: ThreadId, *, for_update: bool = False) -> Thread | None:
        query = _GET_FOR_UPDATE if for_update else _GET
        row = (await self._conn.run(query, {"p_org": org_id, "p_id": thread_id})).first()
        return _to_entity(row) if row else None

    async def get_to_run(self, org_id: OrgId, thread_id: ThreadId, agent_id: AgentId | None) -> ThreadToRun | None:
        parameters = {"p_org": org_id, "p_id": thread_id, "p_agent": agent_id}
        postgresql = self._conn.dialect.name == "postgresql"
        row = (await self._conn.run(_GET_TO_RUN_AS_SEEN if postgresql else _GET_TO_RUN, parameters)).first()
        if row is None:
            return None
        unfinished = row
        if postgresql and not row.as_seen:
            # The thread changed while this statement waited for it: a run created by that change would be missed.
            # Read again now that the thread is locked (a statement of its own sees what was committed before it).
            unfinished = (await self._conn.run(_UNFINISHED_OF_THREAD, {"p_org": org_id, "p_id": thread_id})).first()
        return ThreadToRun(thread=_to_entity(row), agent=joined_agent(row), unfinished=_unfinished(unfinished))

    async def list(
        self, org_id: OrgId, *, limit: int, after: ThreadId | None, agent_id: AgentId | None = None
    ) -> Sequence[Thread]:
        query = select(threads).where(threads.c.org_id == org_id).order_by(threads.c.id).limit(limit)
        if after is not None:
            query = query.where(threads.c.id > after)
        if agent_id is not None:
            query = query.where(threads.c.agent_id == agent_id)
        return [_to_entity(row) for row in await self._conn.execute(query)]

    async def save(self, thread: Thread) -> None:
        await self._conn.later(  # nothing reads it back before the commit: sent with the unit's other writes
            _SAVE,
            {
                "p_org": thread.org_id,
                "p_id": thread.id,
                "agent_id": thread.agent_id,
                "title": thread.title,
                "metadata": thread.metadata,
                "message_count": thread.message_count,
                "updated_at": thread.updated_at,
            },
        )

    async def counted(self, org_id: OrgId, thread_id: ThreadId, message_count: int, now: datetime) -> None:
        await self._conn.later(_COUNTED, {"p_org": org_id, "p_id": thread_id, "p_count": message_count, "p_now": now})

    async def delete(self, org_id: OrgId, thread_id: ThreadId) -> None:
        await self._conn.execute(delete(threads).where(threads.c.org_id == org_id, threads.c.id == thread_id))
