from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from domain.ids import OrgId
from domain.organizations import Organization
from infrastructure.persistence.errors import refused
from infrastructure.persistence.repositories._rows import utc_required
from infrastructure.persistence.tables import organizations


def _to_entity(row: Any) -> Organization:
    return Organization(id=OrgId(row.id), name=row.name, slug=row.slug, created_at=utc_required(row.created_at))


class SqlOrganizationRepository:
    def __init__(self, connection: AsyncConnection) -> None:
        self._conn = connection

    async def add(self, org: Organization) -> None:
        try:
            await self._conn.execute(
                insert(organizations).values(id=org.id, name=org.name, slug=org.slug, created_at=org.created_at)
            )
        except IntegrityError as error:
            raise refused(error, org.slug) from None

    async def get(self, org_id: OrgId) -> Organization | None:
        row = (await self._conn.execute(select(organizations).where(organizations.c.id == org_id))).first()
        return _to_entity(row) if row else None

    async def get_by_slug(self, slug: str) -> Organization | None:
        row = (await self._conn.execute(select(organizations).where(organizations.c.slug == slug))).first()
        return _to_entity(row) if row else None
