import base64
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar
from uuid import UUID

from pydantic import (
    AliasChoices,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    field_validator,
    model_validator,
)

from application.caller import Caller
from application.use_cases.integrations import (
    CREDENTIALS_MAX,
    ConnectionTest,
    CreateMcpIntegrationCommand,
    UpdateMcpIntegrationCommand,
)
from domain.ids import IntegrationId
from domain.integrations import (
    INTEGRATION_NAME_MAX,
    INTEGRATION_SLUG_MAX,
    TIMEOUT_MAX_SECONDS,
    TIMEOUT_MIN_SECONDS,
    URL_MAX,
    AuthType,
    ConnectionStatus,
    FilterMode,
    IntegrationChanges,
    SealedSecret,
    ToolFilter,
    Transport,
)
from infrastructure.http.errors import status_of
from infrastructure.http.schemas.common import PatchModel, RequestModel, ResponseModel, Visible

T = TypeVar("T")
Name = Annotated[str, StringConstraints(min_length=1, max_length=INTEGRATION_NAME_MAX, strict=True), Visible]
Slug = Annotated[
    str, StringConstraints(min_length=1, max_length=INTEGRATION_SLUG_MAX, pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
]
Url = Annotated[str, StringConstraints(min_length=1, max_length=URL_MAX, strict=True)]
ServerName = Annotated[str, StringConstraints(min_length=1, max_length=200, strict=True)]
HeaderName = Annotated[str, StringConstraints(min_length=1, max_length=100, strict=True)]
Credentials = Annotated[str, StringConstraints(min_length=1, max_length=CREDENTIALS_MAX, strict=True)]
Timeout = Annotated[StrictInt, Field(ge=TIMEOUT_MIN_SECONDS, le=TIMEOUT_MAX_SECONDS)]
ToolName = Annotated[str, StringConstraints(min_length=1, max_length=128, strict=True)]


class ToolFilterIn(RequestModel):
    mode: FilterMode = FilterMode.ALL
    names: list[ToolName] = Field(default_factory=list, max_length=256)

    def to_domain(self) -> ToolFilter:
        return ToolFilter(mode=self.mode, names=tuple(dict.fromkeys(self.names)))


class IntegrationCreate(RequestModel):
    name: Name
    slug: Slug | None = Field(default=None, description="Tool-name namespace, unique in the organization")
    transport: Transport = Transport.STREAMABLE_HTTP
    url: Url | None = Field(default=None, description="Server URL (streamable_http, sse)")
    server: ServerName | None = Field(default=None, description="Operator-defined server name (stdio)")
    auth_type: AuthType = AuthType.NONE
    auth_header_name: HeaderName | None = Field(default=None, description="Header carrying the credential (header)")
    credentials: Credentials | None = Field(default=None, description="Stored encrypted; never returned")
    tool_filter: ToolFilterIn = Field(default_factory=ToolFilterIn)
    timeout_seconds: Timeout = 30
    enabled: StrictBool = True

    def to_command(self, caller: Caller) -> CreateMcpIntegrationCommand:
        return CreateMcpIntegrationCommand(
            caller=caller,
            name=self.name,
            slug=self.slug,
            transport=self.transport,
            url=self.url,
            server=self.server,
            auth_type=self.auth_type,
            auth_header_name=self.auth_header_name,
            credentials=self.credentials,
            tool_filter=self.tool_filter.to_domain(),
            timeout_seconds=self.timeout_seconds,
            enabled=self.enabled,
        )


class IntegrationUpdate(PatchModel):
    """Only the fields sent change. `credentials` replaces the stored one; `clear_credentials` removes it."""

    name: Name | None = None
    slug: Slug | None = None
    transport: Transport | None = None
    url: Url | None = None
    server: ServerName | None = None
    auth_type: AuthType | None = None
    auth_header_name: HeaderName | None = None
    credentials: Credentials | None = None
    clear_credentials: StrictBool = False
    tool_filter: ToolFilterIn | None = None
    timeout_seconds: Timeout | None = None
    enabled: StrictBool | None = None

    @model_validator(mode="after")
    def _one_way_to_credentials(self) -> "IntegrationUpdate":
        if self.clear_credentials and self.credentials is not None:
            raise ValueError("send either credentials or clear_credentials, not both")
        return self

    def to_command(self, caller: Caller, integration_id: UUID) -> UpdateMcpIntegrationCommand:
        changes = IntegrationChanges(
            name=self.name,
            slug=self.slug,
            transport=self.transport,
            url=self.url,
            server=self.server,
            auth_type=self.auth_type,
            auth_header_name=self.auth_header_name,
            clear_credentials=self.clear_credentials,
            tool_filter=self.tool_filter.to_domain() if self.tool_filter else None,
            timeout_seconds=self.timeout_seconds,
            enabled=self.enabled,
        )
        return UpdateMcpIntegrationCommand(
            caller=caller,
            integration_id=IntegrationId(integration_id),
            changes=changes,
            credentials=self.credentials,
        )


class CredentialsOut(ResponseModel):
    set: bool
    last4: str | None = Field(description="Last four characters, for long enough credentials only")


class ToolFilterOut(ResponseModel):
    mode: FilterMode
    names: list[str]


class IntegrationOut(ResponseModel):
    id: UUID
    name: str
    slug: str
    transport: Transport
    url: str | None
    server: str | None
    auth_type: AuthType
    auth_header_name: str | None
    credentials: CredentialsOut
    tool_filter: ToolFilterOut
    timeout_seconds: int
    enabled: bool
    connection_status: ConnectionStatus
    last_error: str | None
    last_checked_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @field_validator("credentials", mode="before")
    @classmethod
    def _never_the_secret(cls, sealed: SealedSecret | dict[str, Any] | None) -> dict[str, Any]:
        if isinstance(sealed, dict):
            return sealed
        # Whether a credential is stored and its last four characters; the ciphertext stays here.
        return {"set": sealed is not None, "last4": (sealed.last4 or None) if sealed else None}


class ServerInfoOut(ResponseModel):
    name: str | None
    version: str | None
    protocol_version: str
    capabilities: dict[str, Any]
    tools: int
    resources: int
    resource_templates: int
    prompts: int


class ErrorOut(ResponseModel):
    error: str
    detail: str
    status: int


class ConnectionTestOut(ResponseModel):
    ok: bool
    connection_status: ConnectionStatus
    checked_at: datetime | None
    server: ServerInfoOut | None
    error: ErrorOut | None

    @classmethod
    def of(cls, test: ConnectionTest) -> "ConnectionTestOut":
        # Flattens the integration's status and names the error with its HTTP status.
        error = test.error
        return cls(
            ok=error is None,
            connection_status=test.integration.connection_status,
            checked_at=test.integration.last_checked_at,
            server=ServerInfoOut.model_validate(test.server) if test.server else None,
            error=ErrorOut(error=type(error).__name__, detail=error.detail, status=status_of(error)) if error else None,
        )


class ToolOut(ResponseModel):
    name: str
    title: str | None
    description: str
    input_schema: dict[str, Any]


class ResourceOut(ResponseModel):
    uri: str
    name: str
    description: str | None
    mime_type: str | None
    size: int | None


class ResourceTemplateOut(ResponseModel):
    uri_template: str
    name: str
    description: str | None
    mime_type: str | None


class PromptArgumentOut(ResponseModel):
    name: str
    description: str | None
    required: bool


class PromptOut(ResponseModel):
    name: str
    description: str | None
    arguments: list[PromptArgumentOut]


class CatalogOut(ResponseModel, Generic[T]):
    """A whole catalog: the server's every page, followed."""

    data: list[T]


class ToolCallIn(RequestModel):
    arguments: dict[str, Any] = Field(default_factory=dict)


class ContentPartOut(ResponseModel):
    type: str
    text: str | None = None
    data: str | None = None
    mime_type: str | None = None
    uri: str | None = None
    name: str | None = None


class ToolCallOut(ResponseModel):
    is_error: bool
    text: str = Field(description="The result as a model reads it")
    content: list[ContentPartOut] = Field(validation_alias=AliasChoices("content", "parts"))
    structured_content: dict[str, Any] | None = Field(validation_alias=AliasChoices("structured_content", "structured"))


class ResourceReadIn(RequestModel):
    uri: Annotated[str, StringConstraints(min_length=1, max_length=URL_MAX, strict=True)]
    import_: StrictBool = Field(default=False, alias="import", description="Import it as a source of the thread")
    thread_id: UUID | None = None

    @model_validator(mode="after")
    def _thread_for_import(self) -> "ResourceReadIn":
        if self.import_ and self.thread_id is None:
            raise ValueError("import needs thread_id: the thread the resource becomes a source of")
        if not self.import_ and self.thread_id is not None:
            raise ValueError("thread_id is only used with import: true")
        return self


class ResourceContentOut(ResponseModel):
    uri: str
    mime_type: str | None
    text: str | None = None
    blob: str | None = Field(default=None, description="base64")

    @field_validator("blob", mode="before")
    @classmethod
    def _base64(cls, blob: bytes | str | None) -> str | None:
        return base64.b64encode(blob).decode() if isinstance(blob, bytes) else blob


class PromptGetIn(RequestModel):
    arguments: dict[str, Annotated[str, StringConstraints(max_length=100_000, strict=True)]] = Field(
        default_factory=dict, max_length=64
    )


class PromptMessageOut(ResponseModel):
    role: str
    content: str


class PromptResultOut(ResponseModel):
    description: str | None
    messages: list[PromptMessageOut]
