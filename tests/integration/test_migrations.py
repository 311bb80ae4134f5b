"""Every migration upgrades, downgrades and upgrades again, on the database under test."""

from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import create_async_engine

from infrastructure.persistence import migrations
from tests.databases import fresh_database


def _revisions() -> list[str]:
    script = ScriptDirectory(str(migrations.SCRIPT_LOCATION))
    return [r.revision for r in reversed(list(script.walk_revisions()))]


async def _tables(url: str) -> set[str]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(lambda sync: set(inspect(sync).get_table_names()))
    finally:
        await engine.dispose()


@pytest.fixture(scope="module")
def stairway_results(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Runs the stairway in a fresh database (blocking work, done outside the event loop)."""
    done = []
    with fresh_database(Path(tmp_path_factory.mktemp("stairway"))) as url:
        for revision in _revisions():
            migrations.upgrade(url, revision)
            migrations.downgrade(url, "-1")
            migrations.upgrade(url, revision)
            done.append(revision)
        migrations.downgrade(url, "base")
        migrations.upgrade(url, "head")
        done.append(url)
    return done


def test_every_revision_goes_up_down_and_up_again(stairway_results: list[str]) -> None:
    assert stairway_results[:-1] == _revisions()
    assert len(_revisions()) >= 1


def test_the_schema_at_head_has_the_core_tables(tmp_path: Path) -> None:
    import asyncio

    with fresh_database(tmp_path) as url:
        migrations.upgrade(url)
        tables = asyncio.run(_tables(url))
        migrations.downgrade(url, "base")
        after = asyncio.run(_tables(url))
    assert {"organizations", "api_keys", "agents", "threads", "messages"} <= tables
    assert after <= {"alembic_version"}
