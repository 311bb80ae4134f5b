from datetime import datetime
from uuid import UUID

from pydantic import BaseModel

from application.use_cases.organizations import Me
from domain.organizations import Organization


class OrganizationOut(BaseModel):
    id: UUID
    name: str
    slug: str
    created_at: datetime

    @classmethod
    def of(cls, org: Organization) -> "OrganizationOut":
        return cls(id=org.id, name=org.name, slug=org.slug, created_at=org.created_at)


class MeOut(BaseModel):
    organization: OrganizationOut
    role: str
    api_key_id: UUID | None
    api_key_name: str | None

    @classmethod
    def of(cls, me: Me) -> "MeOut":
        return cls(
            organization=OrganizationOut.of(me.organization),
            role=me.role.value,
            api_key_id=me.api_key.id if me.api_key else None,
            api_key_name=me.api_key.name if me.api_key else None,
        )
