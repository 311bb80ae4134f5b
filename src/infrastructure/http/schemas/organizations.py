from datetime import datetime
from uuid import UUID

from pydantic import AliasPath, Field, JsonValue

from application.caller import Caller
from application.use_cases.organizations import UpdateOrganizationCommand
from domain.organizations import SEARCH_LANGUAGES
from infrastructure.http.schemas.common import PatchModel, ResponseModel


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
    search_language: str
    """The language its sources' words are stemmed and searched in (PostgreSQL's text search configuration of
    that name; SQLite's index stems English words whatever the language)"""


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


_LANGUAGES: list[JsonValue] = [*sorted(SEARCH_LANGUAGES)]


class OrganizationUpdate(PatchModel):
    """The organization's settings an admin may change."""

    search_language: str | None = Field(default=None, json_schema_extra={"enum": _LANGUAGES})
    """The language its sources are searched in; its passages are indexed again in it at once"""

    def to_command(self, caller: Caller) -> UpdateOrganizationCommand:
        return UpdateOrganizationCommand(caller=caller, search_language=self.search_language)
