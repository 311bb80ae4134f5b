from datetime import datetime

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from application.ports.persistence import HistorySummary
from domain.ids import OrgId, ThreadId
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.tables import thread_summaries as table


class SqlThreadSummaryRepository:
    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def get(self, org_id: OrgId, thread_id: ThreadId) -> HistorySummary | None:
        query = select(table.c.covers_upto, table.c.text).where(
            table.c.org_id == org_id, table.c.thread_id == thread_id
        )
        row = (await self._conn.execute(query)).first()
        return HistorySummary(covers_upto=row.covers_upto, text=row.text) if row else None

    async def save(self, org_id: OrgId, thread_id: ThreadId, summary: HistorySummary, *, now: datetime) -> None:
        insert = pg_insert if self._conn.dialect.name == "postgresql" else sqlite_insert
        values = {"covers_upto": summary.covers_upto, "text": summary.text, "updated_at": now}
        statement = insert(table).values(thread_id=thread_id, org_id=org_id, **values)
        await self._conn.execute(statement.on_conflict_do_update(index_elements=[table.c.thread_id], set_=values))
