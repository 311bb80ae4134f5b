from datetime import datetime
from typing import Annotated
from uuid import UUID

from pydantic import Field, StringConstraints

from application.caller import Caller
from application.use_cases.api_keys import CreateApiKeyCommand, IssuedApiKey
from domain.api_keys import API_KEY_NAME_MAX, Role
from infrastructure.http.schemas.common import RequestModel, ResponseModel, Visible


class ApiKeyCreate(RequestModel):
    name: Annotated[str, StringConstraints(min_length=1, max_length=API_KEY_NAME_MAX, strict=True), Visible]
    role: Role = Role.MEMBER

    def to_command(self, caller: Caller) -> CreateApiKeyCommand:
        return CreateApiKeyCommand(caller=caller, name=self.name, role=self.role)


class ApiKeyOut(ResponseModel):
    id: UUID
    name: str
    role: Role
    prefix: str = Field(description="Identifies the key; the secret itself is never shown again")
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None


class IssuedApiKeyOut(ApiKeyOut):
    key: str = Field(description="The secret API key. Shown only in this response: store it now")

    @classmethod
    def issued(cls, issued: IssuedApiKey) -> "IssuedApiKeyOut":
        # The key's fields and its one-time secret come from two objects.
        return cls(**ApiKeyOut.model_validate(issued.api_key).model_dump(), key=issued.plaintext)
