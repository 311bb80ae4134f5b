"""PostgreSQL connections the server closes (a restart, pg_terminate_backend) are replaced, without a round
trip per checkout: the next unit of work gets a working connection instead of failing."""

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

from infrastructure.persistence.engine import Database
from infrastructure.persistence.unit_of_work import SqlAlchemyUnitOfWork
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


async def _backend_of(uow: SqlAlchemyUnitOfWork) -> int:
    async with uow as transaction:
        connection: AsyncConnection = transaction._connection  # type: ignore[attr-defined]
        return int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def _terminate(database_url: str, pid: int) -> None:
    """Ends a server process from a connection of another pool, and waits until it is gone."""
    engine = create_async_engine(database_url, poolclass=NullPool)
    async with engine.connect() as admin:
        await admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        await admin.commit()
        while (
            await admin.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid})
        ).scalar_one():
            await admin.rollback()  # a fresh snapshot of pg_stat_activity
            await asyncio.sleep(0.01)
    await engine.dispose()


async def test_a_connection_ended_by_the_server_is_replaced_at_the_next_use(
    database: Database, database_url: str
) -> None:
    uow = SqlAlchemyUnitOfWork(database, read_only=True)
    pooled = await _backend_of(uow)
    await _terminate(database_url, pooled)

    replacement = await _backend_of(uow)

    assert replacement != pooled
