"""The audit log pages by id: on PostgreSQL, an organization's events must be committed in id order, or a reader
who paged past a newer event would never see an older one committed after it."""

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from domain.audit import AuditAction, AuditEvent
from domain.ids import OrgId
from infrastructure.container import Container
from tests import builders
from tests.conftest import as_port
from tests.databases import backend

pytestmark = pytest.mark.skipif(backend() != "postgresql", reason="SQLite has one writer at a time")

WAITING_FOR_LOCK = text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")


def _event(org_id: OrgId, object_id: str) -> AuditEvent:
    return AuditEvent(
        org_id=org_id,
        action=AuditAction.AGENT_CREATED,
        object_id=object_id,
        actor_key_id=None,
        at=datetime.now(UTC),
    )


async def test_a_second_writer_of_an_organizations_events_waits_for_the_first_to_commit(
    container: Container,
) -> None:
    org = builders.organization()
    async with as_port(container.uow()) as uow:
        await uow.organizations.add(org)
        await uow.commit()
    first_written, release_first = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with as_port(container.uow()) as uow:
            await uow.audit_events.add(_event(org.id, "first"))
            first_written.set()
            await release_first.wait()
            await uow.commit()

    async def second() -> None:
        async with as_port(container.uow()) as uow:
            await uow.audit_events.add(_event(org.id, "second"))
            await uow.commit()

    writing = asyncio.create_task(first())
    await first_written.wait()
    waiting = asyncio.create_task(second())
    database = container.database()
    async with asyncio.timeout(10):  # the second writer is queued behind the first one's lock
        while True:
            async with database.engine.connect() as conn:
                if (await conn.execute(WAITING_FOR_LOCK)).scalar_one() >= 1:
                    break
            await asyncio.sleep(0.05)
    assert not waiting.done()
    release_first.set()
    await asyncio.gather(writing, waiting)
    async with as_port(container.uow()).read_only() as uow:
        events = await uow.audit_events.list(org.id, limit=10, after=None)
    assert [e.object_id for e in events] == ["first", "second"]
