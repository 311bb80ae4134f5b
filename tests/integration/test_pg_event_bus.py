"""Run events across processes through PostgreSQL: each bus stands for one process of a deployment."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import psycopg
import pytest

from application.ports.execution import RunSubscription
from domain.ids import AgentId, MessageId, OrgId, RunId, ThreadId
from domain.run_events import MessageDelta, RunCreated, RunEvent, ToolCallCompleted
from infrastructure.execution.pg_event_bus import CHANNEL, PostgresRunEventBus
from infrastructure.execution.pg_listener import libpq_dsn
from tests import builders
from tests.databases import backend

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
            await worker.publish(_delta(run_id, seq, f"word {seq} "))
        received = await _received(follower, 200)
    assert [e.seq for e in received] == list(range(1, 201))
    assert received[41].payload == MessageDelta(message_id=MessageId(uuid.UUID(int=1)), text="word 42 ")


async def test_a_runs_creation_is_not_sent_to_other_processes_their_followers_read_it_from_storage(
    buses: tuple[PostgresRunEventBus, PostgresRunEventBus],
) -> None:
    """It is stored with the run, before another process could know of the run; sent, it would only wake every
    listening connection of the database."""
    api, worker = buses
    run = builders.run(OrgId(uuid.uuid4()), ThreadId(uuid.uuid4()), AgentId(uuid.uuid4()))
    created = RunEvent(run_id=run.id, seq=1, payload=RunCreated.of(run), created_at=datetime.now(UTC))
    async with api.subscribe(run.id) as follower, worker.subscribe(run.id) as local:
        await worker.publish(created)
        await worker.publish(_delta(run.id, 2, "after it"))
        assert [e.seq for e in await _received(follower, 1)] == [2]
        assert [e.seq for e in await _received(local, 2)] == [1, 2]  # the publishing process's own followers


async def test_events_published_just_before_a_process_closes_still_reach_other_processes(database_url: str) -> None:
    api, worker = PostgresRunEventBus(database_url), PostgresRunEventBus(database_url)
    await api.start()
    await worker.start()
    run_id = RunId(uuid.uuid4())
    try:
        async with api.subscribe(run_id) as follower:
            for seq in range(1, 51):
                await worker.publish(_delta(run_id, seq, f"word {seq} "))
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
        await worker.publish(RunEvent(run_id=run_id, seq=3, payload=big, created_at=datetime.now(UTC)))
        await worker.publish(_delta(run_id, 4, "after"))
        received = await _received(follower, 2)
    assert received[0].payload == big
    assert received[1].seq == 4


async def test_a_follower_in_the_publishing_process_gets_each_event_once(
    buses: tuple[PostgresRunEventBus, PostgresRunEventBus],
) -> None:
    api, worker = buses
    run_id = RunId(uuid.uuid4())
    async with worker.subscribe(run_id) as local:
        await worker.publish(_delta(run_id, 1, "one"))
        await worker.publish(_delta(run_id, 2, "two"))
        await api.publish(_delta(run_id, 3, "three"))  # arrives after the echoes of 1 and 2, had they come
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
        await worker.publish(_delta(run_id, 1, "after the loss"))
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
                await worker.publish(_delta(run_id, seq, f"word {seq} "))
            await worker.sent()
            received = await _received(follower, 2)
    finally:
        await api.close()
        await worker.close()
    assert [e.seq for e in received] == [1, 2]
