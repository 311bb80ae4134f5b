"""SQLite: a write that must wait for another process's lock waits without holding up the process."""

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text

from infrastructure.persistence.engine import READ_ONLY, Database
from infrastructure.persistence.sqlite_driver import CHECKPOINT_EVERY


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    opened = Database(f"sqlite+aiosqlite:///{tmp_path}/locks.db")
    async with opened.engine.begin() as connection:
        await connection.execute(text("CREATE TABLE notes (body TEXT NOT NULL)"))
    yield opened
    await opened.dispose()


async def _write(database: Database, body: str) -> None:
    async with database.writing(), database.engine.connect() as connection:
        await connection.begin()
        await connection.execute(text("INSERT INTO notes VALUES (:body)"), {"body": body})
        await connection.commit()


async def _notes(database: Database) -> list[str]:
    async with database.engine.connect() as connection:
        await connection.execution_options(**{READ_ONLY: True})  # a snapshot, no write lock
        return [row.body for row in await connection.execute(text("SELECT body FROM notes ORDER BY rowid"))]


async def test_a_write_waits_for_another_process_lock_while_reads_go_on(database: Database, tmp_path: Path) -> None:
    other = sqlite3.connect(tmp_path / "locks.db", isolation_level=None)  # as another process would
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO notes VALUES ('theirs')")
    try:
        writing = asyncio.create_task(_write(database, "ours"))
        for _ in range(20):
            await asyncio.sleep(0)  # let the write reach its BEGIN IMMEDIATE
        assert not writing.done()
        assert await _notes(database) == []  # a read goes on while the write waits
    finally:
        other.execute("COMMIT")
        other.close()
    await writing
    assert await _notes(database) == ["theirs", "ours"]


async def test_a_failed_statement_leaves_the_connection_usable(database: Database) -> None:
    async with database.engine.connect() as connection:
        with pytest.raises(Exception, match="no such table"):
            await connection.execute(text("SELECT * FROM missing"))
        await connection.rollback()
    await _write(database, "after")
    assert await _notes(database) == ["after"]


async def test_a_writer_of_this_process_that_did_not_take_its_turn_waits_without_stopping_the_one_writing(
    database: Database,
) -> None:
    # The first transaction's statements run on the event loop's thread; the second's BEGIN IMMEDIATE waits for
    # SQLite's lock in SQLite's thread, so the first one goes on and commits (else both would wait 30 s).
    async with database.engine.connect() as first:
        await first.begin()
        await first.execute(text("INSERT INTO notes VALUES ('first')"))

        async def second() -> None:
            async with database.engine.connect() as connection:
                await connection.begin()
                await connection.execute(text("INSERT INTO notes VALUES ('second')"))
                await connection.commit()

        waiting = asyncio.create_task(second())
        for _ in range(20):
            await asyncio.sleep(0)  # let the second writer reach its BEGIN IMMEDIATE
        assert not waiting.done()
        await first.execute(text("INSERT INTO notes VALUES ('first, again')"))
        await first.commit()
    async with asyncio.timeout(10):
        await waiting
    assert await _notes(database) == ["first", "first, again", "second"]


async def test_a_writing_transaction_whose_statement_fails_is_rolled_back_whole(database: Database) -> None:
    async with database.engine.begin() as connection:
        await connection.execute(text("CREATE UNIQUE INDEX one_body ON notes (body)"))
    with pytest.raises(Exception, match="UNIQUE"):
        async with database.writing(), database.engine.begin() as connection:
            await connection.execute(text("INSERT INTO notes VALUES ('kept only if all goes in')"))
            await connection.execute(text("INSERT INTO notes VALUES ('twice')"))
            await connection.execute(text("INSERT INTO notes VALUES ('twice')"))
    assert await _notes(database) == []
    await _write(database, "after")
    assert await _notes(database) == ["after"]


async def test_the_log_of_many_writes_is_checkpointed_into_the_database_file(
    database: Database, tmp_path: Path
) -> None:
    # Commits only append to the log; every CHECKPOINT_EVERY of them it is copied into the database file and
    # starts over, so it holds at most about that many commits' pages instead of growing with every write.
    writes = 5 * CHECKPOINT_EVERY
    for n in range(writes):
        await _write(database, f"note {n}")
    other = sqlite3.connect(tmp_path / "locks.db")  # as another process would
    try:
        _busy, pages_in_log, _copied = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert pages_in_log < 2.5 * CHECKPOINT_EVERY < writes
        assert other.execute("SELECT count(*) FROM notes").fetchone() == (writes,)  # every write is there
    finally:
        other.close()
