"""Database errors in the application's words, on the configured backend (SQLite, or PostgreSQL when
THREADLINE_TEST_POSTGRES_URL is set): refused constraints as domain errors, outages as StorageUnavailable."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from application.errors import Conflict, SlugTaken, StorageUnavailable
from domain.ids import AgentId
from infrastructure.container import Container
from infrastructure.persistence.engine import Database
from infrastructure.persistence.unit_of_work import SqlAlchemyUnitOfWork
from tests import builders
from tests.conftest import as_port
from tests.databases import POSTGRES_URL
from tests.unreachable import unreachable_database_urls


async def test_a_taken_name_is_the_domain_error_it_means(container: Container) -> None:
    org = builders.organization()
    template = builders.prompt_template(org.id, name="release_notes")
    async with as_port(container.uow()) as uow:
        await uow.organizations.add(org)
        await uow.prompt_templates.add(template)
        await uow.commit()
    with pytest.raises(SlugTaken, match="'release_notes' already exists"):
        async with as_port(container.uow()) as uow:
            await uow.prompt_templates.add(template)


async def test_a_reference_to_something_deleted_meanwhile_is_a_conflict(container: Container) -> None:
    """A foreign key the database refuses (here: a template bound to an agent that is gone) is a 409, not
    a taken name and not a 500."""
    org = builders.organization()
    async with as_port(container.uow()) as uow:
        await uow.organizations.add(org)
        await uow.commit()
    template = builders.prompt_template(org.id, agent_id=AgentId(builders.organization().id))
    with pytest.raises(Conflict) as refused:
        async with as_port(container.uow()) as uow:
            await uow.prompt_templates.add(template)
            await uow.commit()
    assert type(refused.value) is Conflict


async def test_an_unmapped_constraint_leaving_a_transaction_is_a_conflict(container: Container) -> None:
    """A constraint no repository maps (a thread of an organization that does not exist) reaches the unit of
    work as a database error and leaves it as a Conflict."""
    with pytest.raises(Conflict) as refused:
        async with as_port(container.uow()) as uow:
            await uow.threads.add(builders.thread(builders.organization().id))
            await uow.commit()
    assert type(refused.value) is Conflict


@pytest.fixture(params=list(unreachable_database_urls()))
def unreachable_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with request.param(tmp_path) as url:
        yield url


async def test_a_database_that_cannot_be_reached_is_storage_unavailable(unreachable_url: str) -> None:
    database = Database(unreachable_url)
    try:
        with pytest.raises(StorageUnavailable):
            async with as_port(SqlAlchemyUnitOfWork(database)).read_only() as uow:
                await uow.organizations.get_by_slug("acme")
    finally:
        await database.dispose()


@pytest.mark.skipif(POSTGRES_URL is None, reason="a PostgreSQL server: THREADLINE_TEST_POSTGRES_URL")
async def test_a_connection_the_server_ends_is_storage_unavailable(container: Container) -> None:
    """The server ends the sessions while a transaction is open (a restart, an operator): the work fails as
    StorageUnavailable, and the next unit of work gets a working connection."""
    admin = Database(container.settings().database_url)
    try:
        with pytest.raises(StorageUnavailable):
            async with as_port(container.uow()) as uow:
                await uow.organizations.get_by_slug("acme")
                async with admin.engine.connect() as connection:
                    await connection.execute(text(TERMINATE_OTHER_SESSIONS))
                await uow.organizations.get_by_slug("acme")
    finally:
        await admin.dispose()
    async with as_port(container.uow()) as uow:
        assert await uow.organizations.get_by_slug("no-such-org") is None


TERMINATE_OTHER_SESSIONS = """
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
"""
