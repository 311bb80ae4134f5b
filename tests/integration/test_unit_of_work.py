from domain.organizations import Organization
from infrastructure.container import Container
from tests import builders
from tests.conftest import as_port


async def test_nothing_is_written_without_commit(container: Container) -> None:
    org = builders.organization(slug="uncommitted-org")
    async with as_port(container.uow()) as uow:
        await uow.organizations.add(org)
    async with as_port(container.uow()) as uow:
        assert await uow.organizations.get(org.id) is None


async def test_an_error_rolls_the_whole_unit_back(container: Container) -> None:
    org = builders.organization(slug="rolled-back-org")
    try:
        async with as_port(container.uow()) as uow:
            await uow.organizations.add(org)
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    async with as_port(container.uow()) as uow:
        assert await uow.organizations.get_by_slug("rolled-back-org") is None


async def test_committed_work_is_visible_with_timezones(container: Container) -> None:
    org = builders.organization(slug="committed-org")
    async with as_port(container.uow()) as uow:
        await uow.organizations.add(org)
        await uow.commit()
    async with as_port(container.uow()) as uow:
        stored = await uow.organizations.get(org.id)
    assert stored == org
    assert stored is not None and stored.created_at.tzinfo is not None


async def test_one_unit_of_work_serves_concurrent_tasks(container: Container) -> None:
    """Parallel tool calls share their use cases: each task must get a transaction of its own."""
    import asyncio

    uow = as_port(container.uow())
    orgs = [builders.organization(slug=f"concurrent-{i}") for i in range(5)]

    async def add(org: Organization) -> None:
        async with uow as tx:
            await tx.organizations.add(org)
            await asyncio.sleep(0)  # let the other tasks interleave inside their transactions
            await tx.commit()

    await asyncio.gather(*(add(o) for o in orgs))
    async with as_port(container.uow()) as tx:
        stored = [await tx.organizations.get(o.id) for o in orgs]
    assert stored == orgs
