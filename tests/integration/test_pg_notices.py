"""A process's listening connection: every channel it listens to on one connection (pg_listener.Notices)."""

import asyncio
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest

from infrastructure.execution.pg_listener import ChannelListener, Notices, libpq_dsn
from tests.databases import backend

pytestmark = pytest.mark.skipif(
    backend() != "postgresql", reason="LISTEN/NOTIFY needs PostgreSQL (set THREADLINE_TEST_POSTGRES_URL)"
)


class Recording(ChannelListener):
    def __init__(self, channel: str, *, failing: bool = False) -> None:
        super().__init__(channel=channel, what=f"notices of {channel}")
        self.failing = failing
        self.notices: asyncio.Queue[str] = asyncio.Queue()
        self.states: list[str] = []
        self.caught_up = asyncio.Event()
        self.holding: asyncio.Event | None = None
        """Set: a notice's handling waits for it."""
        self.handling = asyncio.Event()

    async def received(self, payload: str, pid: int) -> None:
        if self.failing:
            raise RuntimeError(payload)
        self.handling.set()
        if self.holding is not None:
            await self.holding.wait()
        self.notices.put_nowait(payload)

    def listening(self) -> None:
        self.states.append("listening")

    def not_listening(self) -> None:
        self.states.append("not listening")

    async def listening_again(self) -> None:
        self.caught_up.set()


@pytest.fixture
async def admin(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[tuple[object, ...]]]:
    async with await psycopg.AsyncConnection.connect(libpq_dsn(database_url), autocommit=True) as connection:
        yield connection


@pytest.fixture
async def notices(database_url: str) -> AsyncIterator[Notices]:
    listening = Notices(database_url)
    try:
        yield listening
    finally:
        await listening.close()


def _channels() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"first_{suffix}", f"second_{suffix}"


async def _listening(admin: psycopg.AsyncConnection[tuple[object, ...]], channel: str) -> list[object]:
    """The server processes whose connection listens to `channel` (and the statement it did so with)."""
    found = await admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE query LIKE %s AND datname = current_database()", (f"%{channel}%",)
    )
    return [row[0] for row in await found.fetchall()]


async def _next(listener: Recording) -> str:
    return await asyncio.wait_for(listener.notices.get(), 10)


async def _two_listening(notices: Notices) -> tuple[Recording, Recording]:
    first, second = (Recording(channel) for channel in _channels())
    await notices.listen(first)
    await notices.listen(second)
    return first, second


async def _each_hears_its_own(
    admin: psycopg.AsyncConnection[tuple[object, ...]], first: Recording, second: Recording
) -> None:
    await admin.execute("SELECT pg_notify(%s, 'one'), pg_notify(%s, 'two')", (first.channel, second.channel))
    assert (await _next(first), await _next(second)) == ("one", "two")


async def test_every_channel_is_heard_on_one_connection(
    notices: Notices, admin: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    first, second = await _two_listening(notices)
    await _each_hears_its_own(admin, first, second)
    assert await _listening(admin, first.channel) == await _listening(admin, second.channel)
    assert len(await _listening(admin, first.channel)) == 1


async def test_a_notice_being_handled_when_a_channel_is_added_is_handled_to_its_end(
    notices: Notices, admin: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    first, second = (Recording(channel) for channel in _channels())
    first.holding = asyncio.Event()
    await notices.listen(first)
    await admin.execute("SELECT pg_notify(%s, 'held')", (first.channel,))
    await asyncio.wait_for(first.handling.wait(), 10)
    adding = asyncio.create_task(notices.listen(second))
    await asyncio.sleep(0)  # (the channel's addition waits for the notice's end)
    first.holding.set()
    await asyncio.wait_for(adding, 10)
    await admin.execute("SELECT pg_notify(%s, 'next'), pg_notify(%s, 'two')", (first.channel, second.channel))
    assert [await _next(first), await _next(first), await _next(second)] == ["held", "next", "two"]


async def test_a_lost_connection_is_replaced_and_every_channel_heard_again(
    notices: Notices, admin: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    first, second = await _two_listening(notices)
    [lost] = await _listening(admin, first.channel)
    await admin.execute("SELECT pg_terminate_backend(%s)", (lost,))
    await asyncio.wait_for(asyncio.gather(first.caught_up.wait(), second.caught_up.wait()), 10)
    assert first.states == second.states == ["listening", "not listening", "listening"]
    await _each_hears_its_own(admin, first, second)


async def test_a_channel_whose_notice_fails_leaves_the_others_heard(
    notices: Notices, admin: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    failing_channel, channel = _channels()
    failing, heard = Recording(failing_channel, failing=True), Recording(channel)
    await notices.listen(failing)
    await notices.listen(heard)
    await admin.execute("SELECT pg_notify(%s, 'boom'), pg_notify(%s, 'still')", (failing_channel, channel))
    assert await _next(heard) == "still"
