"""Fresh databases for a test run: a SQLite file, or a new database on a PostgreSQL server.

Set THREADLINE_TEST_POSTGRES_URL (e.g. postgresql+asyncpg://postgres@127.0.0.1:5432/test) to run
against PostgreSQL; each run creates its own databases there and drops them afterwards.
"""

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

POSTGRES_URL = os.environ.get("THREADLINE_TEST_POSTGRES_URL")


def backend() -> str:
    return "postgresql" if POSTGRES_URL else "sqlite"


async def _admin(server_url: str, statement: str) -> None:
    engine = create_async_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.execute(text(statement))
    finally:
        await engine.dispose()


@contextmanager
def postgres_database(server_url: str, prefix: str) -> Iterator[str]:
    """A new database on the server at `server_url`, dropped afterwards. Blocking: not for a running loop."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(server_url, f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextmanager
def fresh_database(directory: Path) -> Iterator[str]:
    """Yields the URL of an empty database, removed afterwards. Blocking: not for a running loop."""
    if POSTGRES_URL is None:
        yield f"sqlite+aiosqlite:///{directory / f'threadline-{uuid.uuid4().hex[:8]}.db'}"
        return
    with postgres_database(POSTGRES_URL, "threadline_test") as url:
        yield url


@asynccontextmanager
async def off_the_loop(database: AbstractContextManager[str]) -> AsyncIterator[str]:
    """A scratch database (`fresh_database(...)`, `postgres_database(...)`) for a test already on its event
    loop: made and dropped in a worker thread, since both block."""
    url = await asyncio.to_thread(database.__enter__)
    try:
        yield url
    finally:
        await asyncio.to_thread(database.__exit__, None, None, None)
