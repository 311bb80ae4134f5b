from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from domain.ids import OrgId
from domain.organizations import Organization
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.errors import refused
from infrastructure.persistence.repositories._rows import utc_required
from infrastructure.persistence.tables import organizations


def _to_entity(row: Any) -> Organization:
    return Organization(
        id=OrgId(row.id),
        name=row.name,
        slug=row.slug,
        created_at=utc_required(row.created_at),
        max_concurrent_runs=row.max_concurrent_runs,
        runs_per_minute=row.runs_per_minute,
        search_language=row.search_language,
    )


class SqlOrganizationRepository:
    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def add(self, org: Organization) -> None:
        try:
            await self._conn.execute(
                insert(organizations).values(
                    id=org.id,
                    name=org.name,
                    slug=org.slug,
                    created_at=org.created_at,
                    max_concurrent_runs=org.max_concurrent_runs,
                    runs_per_minute=org.runs_per_minute,
                    search_language=org.search_language,
                )
            )
        except IntegrityError as error:
            raise refused(error, org.slug) from None

    async def get(self, org_id: OrgId) -> Organization | None:
        row = (await self._conn.execute(select(organizations).where(organizations.c.id == org_id))).first()
        return _to_entity(row) if row else None

    async def get_by_slug(self, slug: str) -> Organization | None:
        row = (await self._conn.execute(select(organizations).where(organizations.c.slug == slug))).first()
        return _to_entity(row) if row else None

    async def save_limits(self, org: Organization) -> None:
        await self._conn.execute(
            update(organizations)
            .where(organizations.c.id == org.id)
            .values(max_concurrent_runs=org.max_concurrent_runs, runs_per_minute=org.runs_per_minute)
        )

    async def save_search_language(self, org: Organization) -> None:
        await self._conn.execute(
            update(organizations).where(organizations.c.id == org.id).values(search_language=org.search_language)
        )
