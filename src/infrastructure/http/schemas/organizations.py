from datetime import datetime
from uuid import UUID

from pydantic import AliasPath, Field

from infrastructure.http.schemas.common import ResponseModel


class OrganizationOut(ResponseModel):
    id: UUID
    name: str
    slug: str
    created_at: datetime


class MeOut(ResponseModel):
    organization: OrganizationOut
    role: str
    api_key_id: UUID | None = Field(default=None, validation_alias=AliasPath("api_key", "id"))
    api_key_name: str | None = Field(default=None, validation_alias=AliasPath("api_key", "name"))
