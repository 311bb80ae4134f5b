"""PostgreSQL connections the server closes (a restart, pg_terminate_backend) are replaced, without a round
trip per checkout: the next unit of work, or the job queue's next query, gets a working connection instead of
failing."""

import asyncio
import contextlib
import select
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import procrastinate
import psycopg
import psycopg_pool
import pytest
from procrastinate import PsycopgConnector
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

from application.errors import StorageUnavailable
from domain.ids import OrgId, RunId
from infrastructure.execution import job_queue
from infrastructure.persistence.engine import Database
from infrastructure.persistence.unit_of_work import SqlAlchemyUnitOfWork
from tests.conftest import as_port
from tests.databases import backend

pytestmark = pytest.mark.skipif(
    backend() != "postgresql",
    reason="connections closed by the server: PostgreSQL (set THREADLINE_TEST_POSTGRES_URL)",
)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    opened = Database(database_url, pool_size=2)
    try:
        yield opened
    finally:
        await opened.dispose()


async def _backend_of(uow: SqlAlchemyUnitOfWork) -> tuple[int, Any]:
    """The server process of the connection a unit of work gets, and the driver's connection."""
    async with uow as transaction:
        connection: AsyncConnection = transaction._connection  # type: ignore[attr-defined]
        pid = int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())
        return pid, (await connection.get_raw_connection()).driver_connection


async def _terminate(database_url: str, pid: int) -> None:
    """Ends a server process from a connection of another pool."""
    engine = create_async_engine(database_url, poolclass=NullPool)
    async with engine.connect() as admin:
        await admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        await admin.commit()
    await engine.dispose()


async def test_a_connection_the_server_ended_is_replaced_at_checkout(database: Database, database_url: str) -> None:
    uow = SqlAlchemyUnitOfWork(database, read_only=True)
    pooled, driver = await _backend_of(uow)
    await _terminate(database_url, pooled)
    while not driver.is_closed():  # noqa: ASYNC110 - until this process has read the end of the connection
        await asyncio.sleep(0.01)

    replacement, _ = await _backend_of(uow)

    assert replacement != pooled


async def test_a_connection_lost_unnoticed_fails_one_use_at_most(database: Database, database_url: str) -> None:
    """Used before this process read the end of its socket, the connection fails that statement (the database
    is unavailable, a 503 for a request); the pool then connects afresh."""
    uow = SqlAlchemyUnitOfWork(database, read_only=True)
    pooled, _ = await _backend_of(uow)
    await _terminate(database_url, pooled)
    with contextlib.suppress(StorageUnavailable):
        await _backend_of(uow)

    replacement, _ = await _backend_of(uow)

    assert replacement != pooled


async def test_a_statement_sent_straight_to_the_driver_on_a_lost_connection_is_an_outage(
    database: Database, database_url: str
) -> None:
    """The run's statements go to the driver without SQLAlchemy's execution (persistence/prepared.py): a
    connection lost under one is still the database unavailable, and is replaced."""
    with pytest.raises(StorageUnavailable):
        async with as_port(SqlAlchemyUnitOfWork(database)) as transaction:
            connection: AsyncConnection = transaction._connection  # type: ignore[attr-defined]
            pooled = int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())
            await _terminate(database_url, pooled)
            await transaction.runs.get(OrgId(uuid4()), RunId(uuid4()))

    replacement, _ = await _backend_of(SqlAlchemyUnitOfWork(database, read_only=True))

    assert replacement != pooled


async def _job_queue_pid(app: procrastinate.App) -> int:
    [row] = await app.connector.execute_query_all_async("SELECT pg_backend_pid() AS pid")
    return int(row["pid"])


async def test_a_job_queue_connection_the_server_ended_is_replaced_as_it_is_taken(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job queue's pool (procrastinate's, on psycopg) checks a connection with a round trip as it hands it out
    only when in doubt, e.g. when the server wrote to it while it was idle: a worker's next query (a job taken or
    finished) still gets a working one, and one taken again soon costs no round trip more."""
    checks: list[int] = []
    check = psycopg_pool.AsyncConnectionPool.check_connection

    async def counted(connection: psycopg.AsyncConnection[Any]) -> None:
        checks.append(connection.info.backend_pid)
        await check(connection)

    monkeypatch.setattr(psycopg_pool.AsyncConnectionPool, "check_connection", counted)
    async with job_queue.opened(database_url, 1, 4) as app:  # its pool has one connection
        pooled = await _job_queue_pid(app)  # new to the pool: checked
        assert await _job_queue_pid(app) == pooled and checks == [pooled]  # taken again at once: not checked
        assert isinstance(app.connector, PsycopgConnector)
        async with app.connector.pool.connection() as connection:
            socket = connection.pgconn.socket
        await _terminate(database_url, pooled)
        async with asyncio.timeout(10):
            while not select.select([socket], [], [], 0)[0]:  # noqa: ASYNC110 - until the server has ended it
                await asyncio.sleep(0.01)

        replacement = await _job_queue_pid(app)

        monkeypatch.setattr(job_queue, "CHECK_AFTER_IDLE_SECONDS", 0)  # idle too long, now at once
        assert await _job_queue_pid(app) == replacement
    assert replacement != pooled
    assert checks[:2] == [pooled, pooled]  # found ended, and replaced
    assert checks[-1] == replacement
