"""Worker mode's gaps, on PostgreSQL: a process whose link to the others was down still gives its followers
the events stored meanwhile."""

import asyncio
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from domain.run_events import RunEvent, RunInProgress
from infrastructure.container import Container
from infrastructure.execution.pg_event_bus import PostgresRunEventBus, libpq_dsn
from infrastructure.settings import Settings
from tests.conftest import as_port
from tests.databases import backend
from tests.integration.test_run_leases import queued_run

pytestmark = pytest.mark.skipif(
    backend() != "postgresql", reason="LISTEN/NOTIFY needs PostgreSQL (set THREADLINE_TEST_POSTGRES_URL)"
)


async def test_events_stored_while_the_listening_connection_was_down_reach_the_followers(
    container: Container, settings: Settings
) -> None:
    _thread, run = await queued_run(container)  # its run.created event is stored
    bus = PostgresRunEventBus(settings.database_url)
    connect, back, listening = bus._connected_listener, asyncio.Event(), list[int]()

    async def held_back() -> psycopg.AsyncConnection[Any]:
        if listening:  # a reconnection: it waits until the test lets it
            await back.wait()
        listener = await connect()
        listening.append(listener.info.backend_pid)
        return listener

    bus._connected_listener = held_back  # type: ignore[method-assign]
    await bus.start()
    try:
        async with (
            bus.subscribe(run.id) as follower,
            await psycopg.AsyncConnection.connect(libpq_dsn(settings.database_url), autocommit=True) as admin,
        ):
            await admin.execute("SELECT pg_terminate_backend(%s)", (listening[0],))
            later = RunEvent(run_id=run.id, seq=2, payload=RunInProgress.of(run), created_at=datetime.now(UTC))
            async with as_port(container.uow()) as uow:  # stored (and notified) while no one here listens
                await uow.run_events.add(later, run.org_id)
                await uow.commit()
            back.set()
            received = [await asyncio.wait_for(follower.next(), 10) for _ in range(2)]
    finally:
        await bus.close()
    assert [(e.seq, e.type.value) for e in received] == [(1, "run.created"), (2, "run.in_progress")]
