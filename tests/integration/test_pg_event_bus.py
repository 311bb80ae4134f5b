"""Run events across processes through PostgreSQL: each bus stands for one process of a deployment."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import psycopg
import pytest

from application.ports.execution import RunSubscription
from domain.ids import MessageId, RunId
from domain.run_events import MessageDelta, RunEvent, RunInProgress, ToolCallCompleted
from domain.runs import Run
from infrastructure.container import Container
from infrastructure.execution.pg_event_bus import CHANNEL, PostgresRunEventBus, libpq_dsn
from infrastructure.persistence.engine import Database
from infrastructure.persistence.unit_of_work import SqlAlchemyUnitOfWork
from tests.conftest import as_port
from tests.databases import backend
from tests.integration.test_run_leases import queued_run

pytestmark = pytest.mark.skipif(
    backend() != "postgresql", reason="LISTEN/NOTIFY needs PostgreSQL (set THREADLINE_TEST_POSTGRES_URL)"
)


@pytest.fixture
async def buses(database_url: str) -> AsyncIterator[tuple[PostgresRunEventBus, PostgresRunEventBus]]:
    first, second = PostgresRunEventBus(database_url), PostgresRunEventBus(database_url)
    await first.start()
    await second.start()
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


def _delta(run_id: RunId, seq: int, text: str) -> RunEvent:
    payload = MessageDelta(message_id=MessageId(uuid.UUID(int=1)), text=text)
    return RunEvent(run_id=run_id, seq=seq, payload=payload, created_at=datetime.now(UTC))


async def _received(subscription: RunSubscription, count: int) -> list[RunEvent]:
    return [await asyncio.wait_for(subscription.next(), 10) for _ in range(count)]


async def test_events_published_by_one_process_reach_followers_of_another_in_order(
    buses: tuple[PostgresRunEventBus, PostgresRunEventBus],
) -> None:
    api, worker = buses
    run_id = RunId(uuid.uuid4())
    async with api.subscribe(run_id) as follower:
        for seq in range(1, 201):
            await worker.publish(_delta(run_id, seq, f"word {seq} "), stored=False)
        received = await _received(follower, 200)
    assert [e.seq for e in received] == list(range(1, 201))
    assert received[41].payload == MessageDelta(message_id=MessageId(uuid.UUID(int=1)), text="word 42 ")


async def test_events_published_just_before_a_process_closes_still_reach_other_processes(database_url: str) -> None:
    api, worker = PostgresRunEventBus(database_url), PostgresRunEventBus(database_url)
    await api.start()
    await worker.start()
    run_id = RunId(uuid.uuid4())
    try:
        async with api.subscribe(run_id) as follower:
            for seq in range(1, 51):
                await worker.publish(_delta(run_id, seq, f"word {seq} "), stored=False)
            await worker.close()  # a worker stopping right after its run's last events
            received = await _received(follower, 50)
    finally:
        await api.close()
    assert [e.seq for e in received] == list(range(1, 51))


async def test_an_event_larger_than_a_notification_arrives_whole(
    buses: tuple[PostgresRunEventBus, PostgresRunEventBus],
) -> None:
    api, worker = buses
    run_id = RunId(uuid.uuid4())
    result = "résultat ✓ 🙂 " * 4_000  # about 60,000 characters, many of them several bytes long
    big = ToolCallCompleted(tool_call_id="call_1", name="fetch", is_error=False, result=result)
    async with api.subscribe(run_id) as follower:
        await worker.publish(RunEvent(run_id=run_id, seq=3, payload=big, created_at=datetime.now(UTC)), stored=False)
        await worker.publish(_delta(run_id, 4, "after"), stored=False)
        received = await _received(follower, 2)
    assert received[0].payload == big
    assert received[1].seq == 4


async def test_a_follower_in_the_publishing_process_gets_each_event_once(
    buses: tuple[PostgresRunEventBus, PostgresRunEventBus],
) -> None:
    api, worker = buses
    run_id = RunId(uuid.uuid4())
    async with worker.subscribe(run_id) as local:
        await worker.publish(_delta(run_id, 1, "one"), stored=False)
        await worker.publish(_delta(run_id, 2, "two"), stored=False)
        await api.publish(_delta(run_id, 3, "three"), stored=False)  # after the echoes of 1 and 2, had they come
        assert [e.seq for e in await _received(local, 3)] == [1, 2, 3]


async def test_a_lost_listening_connection_is_replaced(
    buses: tuple[PostgresRunEventBus, PostgresRunEventBus], database_url: str
) -> None:
    api, worker = buses
    async with await psycopg.AsyncConnection.connect(libpq_dsn(database_url), autocommit=True) as admin:
        lost = await _listeners(admin)
        assert len(lost) == 2  # both processes' listeners
        await admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (sorted(lost),))
        await _new_listeners(admin, lost)
    run_id = RunId(uuid.uuid4())
    async with api.subscribe(run_id) as follower:
        await worker.publish(_delta(run_id, 1, "after the loss"), stored=False)
        assert [e.seq for e in await _received(follower, 1)] == [1]


async def _listeners(admin: psycopg.AsyncConnection[tuple[int]]) -> set[int]:
    listening = await admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE query = %s AND datname = current_database()", (f"LISTEN {CHANNEL}",)
    )
    return {row[0] for row in await listening.fetchall()}


async def _new_listeners(admin: psycopg.AsyncConnection[tuple[int]], lost: set[int]) -> None:
    """Returns once as many connections as were lost listen again (the server has no event to wait on)."""
    for _ in range(1_000):
        if len(await _listeners(admin) - lost) >= len(lost):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the lost listeners were not replaced")


async def test_a_process_that_serves_no_followers_still_sends_its_runs_events(database_url: str) -> None:
    """A worker's bus does not listen (it receives nothing of the other processes), and its events still reach the
    followers of the API processes."""
    worker, api = PostgresRunEventBus(database_url, listening=False), PostgresRunEventBus(database_url)
    await worker.start()
    await api.start()
    run_id = RunId(uuid.uuid4())
    try:
        async with api.subscribe(run_id) as follower:
            for seq in (1, 2):
                await worker.publish(_delta(run_id, seq, f"word {seq} "), stored=False)
            await worker.sent()
            received = await _received(follower, 2)
    finally:
        await api.close()
        await worker.close()
    assert [e.seq for e in received] == [1, 2]


async def _store(database: Database, run: Run, *events: RunEvent) -> None:
    async with as_port(SqlAlchemyUnitOfWork(database, queued_runs=True)) as uow:
        for event in events:
            await uow.run_events.add(event, run.org_id)
        await uow.commit()


async def test_events_stored_in_worker_mode_reach_every_process_once_as_they_commit(
    buses: tuple[PostgresRunEventBus, PostgresRunEventBus], container: Container, database_url: str
) -> None:
    """No process sends a stored event: the database announces it as it commits, to the process that stored it
    too, whole however big (and the process's publishing it after the commit sends nothing more)."""
    api, worker = buses
    _thread, run = await queued_run(container)  # run.created, seq 1
    now = datetime.now(UTC)
    small = RunEvent(run_id=run.id, seq=2, payload=RunInProgress.of(run), created_at=now)
    result = "résultat ✓ 🙂 " * 4_000  # about 60,000 characters, many of them several bytes long
    big_payload = ToolCallCompleted(tool_call_id="call_1", name="fetch", is_error=False, result=result)
    big = RunEvent(run_id=run.id, seq=3, payload=big_payload, created_at=now)
    database = Database(database_url, pool_size=1, announce_run_events=True)
    try:
        async with api.subscribe(run.id) as follower, worker.subscribe(run.id) as local:
            await _store(database, run, small, big)
            for stored in (small, big):
                await worker.publish(stored)
            await worker.publish(_delta(run.id, 4, "after"), stored=False)
            heard, heard_locally = await _received(follower, 3), await _received(local, 3)
            await api.received_all()  # anything sent twice would have arrived by now
            assert follower.received() == []
    finally:
        await database.dispose()
    assert [(e.seq, e.payload, e.created_at) for e in heard[:2]] == [(2, small.payload, now), (3, big_payload, now)]
    assert [e.seq for e in heard] == [2, 3, 4]
    # In the process that stored them, its unstored events reach its followers at once, maybe ahead of stored ones
    # still on their way back (a follower reads the stored ones it skipped from storage).
    assert sorted(e.seq for e in heard_locally) == [2, 3, 4]


async def test_events_stored_by_the_in_process_executor_are_not_announced(
    buses: tuple[PostgresRunEventBus, PostgresRunEventBus], container: Container, database_url: str
) -> None:
    """Its events stay in its process: the database sends no notification for them (that would cost each commit)."""
    api, _worker = buses
    _thread, run = await queued_run(container)
    database = Database(database_url, pool_size=1)
    try:
        async with api.subscribe(run.id) as follower:
            await _store(
                database,
                run,
                RunEvent(run_id=run.id, seq=2, payload=RunInProgress.of(run), created_at=datetime.now(UTC)),
            )
            await api.received_all()  # what was committed before this process's fence has been heard
            assert follower.received() == []
    finally:
        await database.dispose()
