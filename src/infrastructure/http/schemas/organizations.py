from datetime import datetime
from uuid import UUID

from pydantic import AliasPath, Field

from infrastructure.http.schemas.common import ResponseModel


class OrganizationOut(ResponseModel):
    """An organization (tenant)."""

    id: UUID
    """The organization's id"""
    name: str
    """Its name"""
    slug: str
    """Its unique short name"""
    created_at: datetime
    """When it was created"""


class MeOut(ResponseModel):
    """Who the caller is: the organization and role of its API key."""

    organization: OrganizationOut
    """The caller's organization"""
    role: str
    """The key's role: `admin` or `member`"""
    api_key_id: UUID | None = Field(default=None, validation_alias=AliasPath("api_key", "id"))
    """The id of the key that authenticated the request"""
    api_key_name: str | None = Field(default=None, validation_alias=AliasPath("api_key", "name"))
    """The name of that key"""
