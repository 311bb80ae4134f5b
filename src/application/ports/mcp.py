"""The MCP client gateway port: catalogs, tool calls, resources and prompts of one integration's server."""

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from domain.ids import IntegrationId, OrgId
from domain.integrations import AuthType, Transport
from domain.mcp_prompts import PromptResult


@dataclass(frozen=True, kw_only=True)
class McpTarget:
    """Everything needed to reach one integration's server. Built per call from the stored integration;
    `version` changes whenever the integration is updated, so a pooled session of an older version
    is never reused."""

    integration_id: IntegrationId
    org_id: OrgId
    transport: Transport
    version: datetime
    url: str | None = None
    server: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout_seconds: float = 30
    auth_type: AuthType = AuthType.NONE
    """With oauth and client_credentials the gateway obtains (and refreshes) the access token itself."""
    oauth_client: tuple[str, str | None] | None = field(default=None, repr=False)
    """The client id and secret the admin entered (oauth, client_credentials)."""


@dataclass(frozen=True, kw_only=True)
class McpToolInfo:
    name: str
    description: str
    input_schema: Mapping[str, Any]
    title: str | None = None
    read_only: bool = False
    """The server says the tool does not change its environment (its `readOnlyHint` annotation)."""


@dataclass(frozen=True, kw_only=True)
class McpResourceInfo:
    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None


@dataclass(frozen=True, kw_only=True)
class McpResourceTemplateInfo:
    uri_template: str
    name: str
    description: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True, kw_only=True)
class McpPromptArgument:
    name: str
    description: str | None = None
    required: bool = False


@dataclass(frozen=True, kw_only=True)
class McpPromptInfo:
    name: str
    description: str | None = None
    arguments: Sequence[McpPromptArgument] = ()


@dataclass(frozen=True, kw_only=True)
class McpCatalog:
    """What a server offers: its tools, prompts, resources and resource templates."""

    tools: Sequence[McpToolInfo] = ()
    prompts: Sequence[McpPromptInfo] = ()
    resources: Sequence[McpResourceInfo] = ()
    templates: Sequence[McpResourceTemplateInfo] = ()


@dataclass(frozen=True, kw_only=True)
class McpServerInfo:
    name: str | None
    version: str | None
    protocol_version: str
    capabilities: Mapping[str, Any]
    tools: int
    resources: int
    resource_templates: int
    prompts: int


@dataclass(frozen=True, kw_only=True)
class McpContentPart:
    """One part of a tool result: type text, image, audio, resource_link or resource."""

    type: str
    text: str | None = None
    data: str | None = field(default=None, repr=False)
    """base64 for images and audio, and for embedded binary resources."""
    mime_type: str | None = None
    uri: str | None = None
    name: str | None = None


@dataclass(frozen=True, kw_only=True)
class McpToolResult:
    parts: Sequence[McpContentPart]
    structured: Mapping[str, Any] | None
    is_error: bool


@dataclass(frozen=True, kw_only=True)
class McpResourceContent:
    uri: str
    mime_type: str | None
    text: str | None = None
    blob: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True, kw_only=True)
class McpQuestion:
    """A question the server asks the user before it can finish a tool call (form elicitation)."""

    key: str
    message: str
    requested_schema: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class McpInputRequired:
    """The server needs the user's answers to finish the call: ask them, then call again with the answers and
    the state (2026-07-28 servers: the call may be carried on from any process, at any later time)."""

    questions: Sequence[McpQuestion]
    request_state: str | None = field(default=None, repr=False)


@dataclass(frozen=True, kw_only=True)
class McpAnswer:
    """The user's answer to one question (`content` for accept only)."""

    action: str
    content: Mapping[str, Any] | None = None


QuestionAsker = Callable[[McpQuestion], Awaitable[McpAnswer]]
"""Asks the user a question a server sent while a call is open (handshake-era elicitation): the answer."""

ToolProgress = Callable[[float, float | None, str | None], Awaitable[None]]
"""How far a tool call is: progress, total (if known), message."""

ToolLog = Callable[[str, str | None, Any], Awaitable[None]]
"""A log message a server sends during a tool call: level, logger (if named), data."""


@dataclass(frozen=True, kw_only=True)
class McpCallHooks:
    """What a tool call hears while it is open, and what it carries on from, besides its arguments."""

    on_progress: ToolProgress | None = None
    """The server's progress notifications for this call"""
    on_log: ToolLog | None = None
    """The log messages the server sends during this call"""
    on_question: QuestionAsker | None = None
    """Gets the user's answer to what a handshake-era server asks during the call (the call's timeout does not
    run meanwhile); without it the server is told no"""
    answers: Mapping[str, McpAnswer] | None = None
    request_state: str | None = field(default=None, repr=False)
    """The user's answers to the questions of the server's McpInputRequired (by key), and its state: the call
    is made again with them"""


NO_HOOKS = McpCallHooks()


class McpGateway(Protocol):
    """Talks to an integration's MCP server. Raises the typed Mcp* errors of application.errors."""

    async def probe(self, target: McpTarget) -> McpServerInfo:
        """Connect afresh (never from the pool) and describe the server."""
        ...

    async def list_tools(self, target: McpTarget) -> Sequence[McpToolInfo]: ...
    async def list_resources(self, target: McpTarget) -> Sequence[McpResourceInfo]: ...
    async def list_resource_templates(self, target: McpTarget) -> Sequence[McpResourceTemplateInfo]: ...
    async def list_prompts(self, target: McpTarget) -> Sequence[McpPromptInfo]: ...
    async def catalog(self, target: McpTarget) -> McpCatalog:
        """The four lists above at once. Those known already are given without waiting for anything (a run's
        tools are assembled so before each run), the others fetched side by side."""
        ...

    async def call_tool(
        self, target: McpTarget, name: str, arguments: Mapping[str, Any], hooks: McpCallHooks = NO_HOOKS
    ) -> McpToolResult | McpInputRequired:
        """A server that needs the user's input first answers with McpInputRequired; the call is then made again
        with the answers and the state in `hooks`. See McpCallHooks for what else a call hears."""
        ...

    async def read_resource(self, target: McpTarget, uri: str) -> Sequence[McpResourceContent]: ...
    async def get_prompt(self, target: McpTarget, name: str, arguments: Mapping[str, str]) -> PromptResult: ...

    async def forget(self, integration_id: IntegrationId) -> None:
        """Drop the pooled session and cached catalogs of an integration (updated, disabled, deleted)."""
        ...


class OperatorServers(Protocol):
    """The stdio servers the operator defined; tenants can only pick one by name."""

    def names(self) -> Sequence[str]: ...
