"""Running Alembic from code, and telling whether a database is at the latest revision."""

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine

import migrations

SCRIPT_LOCATION = Path(migrations.__file__).parent
JOB_QUEUE_PREFIX = "procrastinate_"


PASSAGE_SEARCH_OBJECTS = ("source_passages_fts", "search_vector", "ix_source_passages_search_vector")


def described_by_tables(name: str | None, type_: str, _parents: object) -> bool:
    """Whether `tables.py` describes a database object: the job queue's tables are procrastinate's
    (revision 0005 creates them), and the passages' full-text index differs by database (revision 0011:
    an FTS5 table and its shadow tables on SQLite, a tsvector column and its index on PostgreSQL), so
    autogenerate and comparisons leave them out."""
    if type_ == "table" and (name or "").startswith(JOB_QUEUE_PREFIX):
        return False
    return not (name or "").startswith(PASSAGE_SEARCH_OBJECTS)


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    config.attributes["database_url"] = database_url
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Blocking: call from a thread when an event loop is running."""
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)


def head_revisions() -> set[str]:
    return set(ScriptDirectory(str(SCRIPT_LOCATION)).get_heads())


async def current_revisions(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as connection:
        return await connection.run_sync(lambda sync: set(MigrationContext.configure(sync).get_current_heads()))
