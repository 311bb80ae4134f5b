from datetime import datetime
from typing import Annotated
from uuid import UUID

from pydantic import ConfigDict, Field, StringConstraints

from application.caller import Caller
from application.use_cases.api_keys import CreateApiKeyCommand, IssuedApiKey
from domain.api_keys import API_KEY_NAME_MAX, Role
from infrastructure.http.schemas.common import RequestModel, ResponseModel, Visible


class ApiKeyCreate(RequestModel):
    """A new API key of the caller's organization."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "web app", "role": "member"}]})

    name: Annotated[str, StringConstraints(min_length=1, max_length=API_KEY_NAME_MAX, strict=True), Visible]
    """What the key is for (e.g. the application using it)"""
    role: Role = Role.MEMBER
    """`admin` may manage keys, integrations and templates; `member` may not"""

    def to_command(self, caller: Caller) -> CreateApiKeyCommand:
        return CreateApiKeyCommand(caller=caller, name=self.name, role=self.role)


class ApiKeyOut(ResponseModel):
    """An API key, without its secret."""

    id: UUID
    """The key's id (to revoke it)"""
    name: str
    """What the key is for"""
    role: Role
    """`admin` or `member`"""
    prefix: str = Field(description="Identifies the key; the secret itself is never shown again")
    created_at: datetime
    """When it was created"""
    revoked_at: datetime | None
    """When it was revoked; null while it works"""
    last_used_at: datetime | None
    """When it last authenticated a request (written at most once a minute); null if never"""


class IssuedApiKeyOut(ApiKeyOut):
    """A key just created, with its secret: the one time the secret is shown."""

    key: str = Field(description="The secret API key. Shown only in this response: store it now")

    @classmethod
    def issued(cls, issued: IssuedApiKey) -> "IssuedApiKeyOut":
        # The key's fields and its one-time secret come from two objects.
        return cls(**ApiKeyOut.model_validate(issued.api_key).model_dump(), key=issued.plaintext)
