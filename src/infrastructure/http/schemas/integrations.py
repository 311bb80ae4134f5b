import base64
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar
from uuid import UUID

from pydantic import (
    AliasChoices,
    ConfigDict,
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
    """Which of the server's tools are offered."""

    mode: FilterMode = FilterMode.ALL
    """`all`, `include` (only `names`) or `exclude` (all but `names`)"""
    names: list[ToolName] = Field(default_factory=list, max_length=256)
    """Tool names the mode applies to"""

    def to_domain(self) -> ToolFilter:
        return ToolFilter(mode=self.mode, names=tuple(dict.fromkeys(self.names)))


class IntegrationCreate(RequestModel):
    """An MCP server to connect (admins)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"name": "Memo", "url": "https://mcp.example.com/mcp", "auth_type": "bearer", "credentials": "s3cret"}
            ]
        }
    )

    name: Name
    """Display name"""
    slug: Slug | None = Field(default=None, description="Tool-name namespace, unique in the organization")
    transport: Transport = Transport.STREAMABLE_HTTP
    """`streamable_http`, `sse` or `stdio` (operator-defined servers only)"""
    url: Url | None = Field(default=None, description="Server URL (streamable_http, sse)")
    server: ServerName | None = Field(default=None, description="Operator-defined server name (stdio)")
    auth_type: AuthType = AuthType.NONE
    """`none`, `bearer` (Authorization header), `header` (auth_header_name), `oauth` (an admin authorizes it:
    POST .../oauth/authorize) or `client_credentials` (OAuth machine to machine)"""
    auth_header_name: HeaderName | None = Field(default=None, description="Header carrying the credential (header)")
    credentials: Credentials | None = Field(
        default=None,
        description="Stored encrypted; never returned. For oauth (optional) and client_credentials: "
        "`client_id:client_secret` (or `client_id` for a public oauth client)",
    )
    tool_filter: ToolFilterIn = Field(default_factory=ToolFilterIn)
    """Which of its tools agents see"""
    timeout_seconds: Timeout = 30
    """Timeout of one request to the server"""
    enabled: StrictBool = True
    """Whether agents and calls may use it"""

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
    """Display name"""
    slug: Slug | None = None
    """Tool-name namespace"""
    transport: Transport | None = None
    """`streamable_http`, `sse` or `stdio`"""
    url: Url | None = None
    """Server URL"""
    server: ServerName | None = None
    """Operator-defined server name (stdio)"""
    auth_type: AuthType | None = None
    """`none`, `bearer`, `header`, `oauth` or `client_credentials`"""
    auth_header_name: HeaderName | None = None
    """Header carrying the credential (header)"""
    credentials: Credentials | None = None
    """Replaces the stored credential"""
    clear_credentials: StrictBool = False
    """Removes the stored credential"""
    tool_filter: ToolFilterIn | None = None
    """Which of its tools agents see"""
    timeout_seconds: Timeout | None = None
    """Timeout of one request to the server"""
    enabled: StrictBool | None = None
    """Whether agents and calls may use it"""

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
    """Whether a credential is stored (never the credential itself)."""

    set: bool
    """Whether a credential is stored"""
    last4: str | None = Field(description="Last four characters, for long enough credentials only")


class ToolFilterOut(ResponseModel):
    """Which of the server's tools are offered."""

    mode: FilterMode
    """`all`, `include` or `exclude`"""
    names: list[str]
    """Tool names the mode applies to"""


class IntegrationOut(ResponseModel):
    """An MCP server the organization connected."""

    id: UUID
    """The integration's id"""
    name: str
    """Display name"""
    slug: str
    """Tool-name namespace: its tools are `<slug>__<tool>`"""
    transport: Transport
    """`streamable_http`, `sse` or `stdio`"""
    url: str | None
    """Server URL (streamable_http, sse)"""
    server: str | None
    """Operator-defined server name (stdio)"""
    auth_type: AuthType
    """`none`, `bearer`, `header`, `oauth` or `client_credentials`"""
    auth_header_name: str | None
    """Header carrying the credential (header)"""
    credentials: CredentialsOut
    """Whether a credential is stored"""
    tool_filter: ToolFilterOut
    """Which of its tools agents see"""
    timeout_seconds: int
    """Timeout of one request to the server"""
    enabled: bool
    """Whether agents and calls may use it"""
    connection_status: ConnectionStatus
    """Outcome of the last connection: `unknown`, `healthy` or `unhealthy`"""
    last_error: str | None
    """What failed at the last connection, if it failed"""
    last_checked_at: datetime | None
    """When it was last connected to"""
    created_at: datetime
    """When it was created"""
    updated_at: datetime
    """When it last changed"""

    @field_validator("credentials", mode="before")
    @classmethod
    def _never_the_secret(cls, sealed: SealedSecret | dict[str, Any] | None) -> dict[str, Any]:
        if isinstance(sealed, dict):
            return sealed
        # Whether a credential is stored and its last four characters; the ciphertext stays here.
        return {"set": sealed is not None, "last4": (sealed.last4 or None) if sealed else None}


class ServerInfoOut(ResponseModel):
    """What the MCP server said about itself."""

    name: str | None
    """The server's name"""
    version: str | None
    """The server's version"""
    protocol_version: str
    """The MCP protocol version agreed"""
    capabilities: dict[str, Any]
    """The capabilities the server announced"""
    tools: int
    """How many tools it offers (after the tool filter)"""
    resources: int
    """How many resources it offers"""
    resource_templates: int
    """How many resource templates it offers"""
    prompts: int
    """How many prompts it offers"""


class ErrorOut(ResponseModel):
    """An error as the API would answer it, with its HTTP status."""

    error: str
    """The error's name"""
    detail: str
    """What went wrong"""
    status: int
    """The HTTP status the error maps to"""


class ConnectionTestOut(ResponseModel):
    """The outcome of connecting to the server afresh."""

    ok: bool
    """Whether the connection worked"""
    connection_status: ConnectionStatus
    """The integration's status after the test"""
    checked_at: datetime | None
    """When the test ran"""
    server: ServerInfoOut | None
    """What the server said about itself; null if the connection failed"""
    error: ErrorOut | None
    """Why it failed; null if it worked"""

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
    """A tool of the MCP server."""

    name: str
    """The tool's name on the server"""
    title: str | None
    """A title for people"""
    description: str
    """What the tool does"""
    input_schema: dict[str, Any]
    """JSON Schema of its arguments"""


class ResourceOut(ResponseModel):
    """A resource of the MCP server."""

    uri: str
    """The resource's URI"""
    name: str
    """Its name"""
    description: str | None
    """What it holds"""
    mime_type: str | None
    """Its mime type"""
    size: int | None
    """Its size in bytes, when the server says"""


class ResourceTemplateOut(ResponseModel):
    """A resource template (a URI with parameters) of the MCP server."""

    uri_template: str
    """RFC 6570 URI template"""
    name: str
    """Its name"""
    description: str | None
    """What its resources hold"""
    mime_type: str | None
    """Their mime type"""


class PromptArgumentOut(ResponseModel):
    """An argument of an MCP prompt."""

    name: str
    """The argument's name"""
    description: str | None
    """What it is"""
    required: bool
    """Whether the prompt needs it"""


class PromptOut(ResponseModel):
    """A prompt of the MCP server."""

    name: str
    """The prompt's name"""
    description: str | None
    """What it is for"""
    arguments: list[PromptArgumentOut]
    """Its arguments"""


class CatalogOut(ResponseModel, Generic[T]):
    """A whole catalog: the server's every page, followed."""

    # A parametrized generic (PageOut[AgentOut]) does not take the docstring into its schema; the config it keeps.
    model_config = ConfigDict(json_schema_extra={"description": "A whole catalog: the server's every page, followed."})

    data: list[T]
    """Every item of the catalog"""


class ToolCallIn(RequestModel):
    """Arguments of a tool call."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"arguments": {"message": "hi"}}]})

    arguments: dict[str, Any] = Field(default_factory=dict)
    """The tool's arguments, as its input_schema describes"""


class ContentPartOut(ResponseModel):
    """A part of a tool's result."""

    type: str
    """`text`, `image`, `audio`, `resource` or `resource_link`"""
    text: str | None = None
    """The text (text parts, text resources)"""
    data: str | None = None
    """base64 bytes (images, audio, blob resources)"""
    mime_type: str | None = None
    """The mime type of the data"""
    uri: str | None = None
    """The resource's URI (resources, links)"""
    name: str | None = None
    """The linked resource's name (links)"""


class ToolCallOut(ResponseModel):
    """A tool's result."""

    is_error: bool
    """Whether the tool reported an error"""
    text: str = Field(description="The result as a model reads it")
    content: list[ContentPartOut] = Field(validation_alias=AliasChoices("content", "parts"))
    """The result's parts"""
    structured_content: dict[str, Any] | None = Field(validation_alias=AliasChoices("structured_content", "structured"))
    """The tool's structured result, when it gives one"""


class ResourceReadIn(RequestModel):
    """A resource to read, or to import into a thread."""

    uri: Annotated[str, StringConstraints(min_length=1, max_length=URL_MAX, strict=True)]
    """The resource's URI"""
    import_: StrictBool = Field(default=False, alias="import", description="Import it as a source of the thread")
    thread_id: UUID | None = None
    """The thread it becomes a source of (with import)"""

    @model_validator(mode="after")
    def _thread_for_import(self) -> "ResourceReadIn":
        if self.import_ and self.thread_id is None:
            raise ValueError("import needs thread_id: the thread the resource becomes a source of")
        if not self.import_ and self.thread_id is not None:
            raise ValueError("thread_id is only used with import: true")
        return self


class ResourceContentOut(ResponseModel):
    """The content of a resource."""

    uri: str
    """The resource's URI"""
    mime_type: str | None
    """Its mime type"""
    text: str | None = None
    """The text, for text resources"""
    blob: str | None = Field(default=None, description="base64")

    @field_validator("blob", mode="before")
    @classmethod
    def _base64(cls, blob: bytes | str | None) -> str | None:
        return base64.b64encode(blob).decode() if isinstance(blob, bytes) else blob


class PromptGetIn(RequestModel):
    """Arguments of an MCP prompt."""

    arguments: dict[str, Annotated[str, StringConstraints(max_length=100_000, strict=True)]] = Field(
        default_factory=dict, max_length=64
    )
    """Values of the prompt's arguments, by name"""


class PromptMessageOut(ResponseModel):
    """A message of a prompt."""

    role: str
    """`user` or `assistant`"""
    content: str
    """The message's text"""


class PromptResultOut(ResponseModel):
    """A prompt with its arguments filled in."""

    description: str | None
    """What the prompt is for"""
    messages: list[PromptMessageOut]
    """Its messages"""
