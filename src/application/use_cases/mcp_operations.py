"""The three MCP operations the run loop (and members, directly) use: tools, resources, prompts."""

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from application.errors import (
    InvalidReference,
    McpError,
    McpInputNeeded,
    McpIntegrationDisabled,
    McpPromptNotFound,
    McpToolNotFound,
)
from application.loaded_integrations import LoadedIntegrations
from application.mcp_access import load_enabled_integration, load_integration, target_of
from application.ports.mcp import (
    NO_HOOKS,
    McpCallHooks,
    McpContentPart,
    McpGateway,
    McpInputRequired,
    McpResourceContent,
    McpResourceInfo,
    McpTarget,
    McpToolResult,
)
from application.ports.persistence import UnitOfWork
from application.ports.security import SecretBox
from application.ports.system import Clock, IdGenerator
from domain.errors import InvalidValue
from domain.ids import AgentId, IntegrationId, OrgId, SourceId, ThreadId
from domain.integrations import McpIntegration
from domain.mcp_prompts import PromptResult
from domain.sources import CreatedBy, Source, SourceKind, SourceOrigin, passages_of, table_from_rows

CSV_MIME_TYPES = frozenset({"text/csv", "application/csv", "text/comma-separated-values"})


@dataclass(frozen=True, kw_only=True)
class ExecuteMcpToolCommand:
    org_id: OrgId
    integration_id: IntegrationId
    tool_name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    hooks: McpCallHooks = NO_HOOKS
    """What the call hears while it is open (progress, logs, questions), and the answers it carries on with"""
    may_ask: bool = False
    """Whether the server may ask the user questions first (in a run, which waits for the answers); else a
    question is McpInputNeeded."""


@dataclass(frozen=True, kw_only=True)
class McpToolOutcome:
    text: str
    """What the model reads: text parts joined, structured content as JSON, placeholders for media."""
    parts: Sequence[McpContentPart]
    structured: Mapping[str, Any] | None
    is_error: bool
    input_required: McpInputRequired | None = None
    """The server's questions for the user, when it asked instead of answering (the call is to be made again
    with the answers)."""


def text_for_model(result: McpToolResult) -> str:
    pieces: list[str] = []
    for part in result.parts:
        if part.type == "text" and part.text is not None:
            pieces.append(part.text)
        elif part.type == "resource" and part.text is not None:
            pieces.append(f"[resource {part.uri}]\n{part.text}")
        elif part.type == "resource_link":
            pieces.append(f"[resource link: {part.name or part.uri} ({part.uri}, {part.mime_type or 'unknown type'})]")
        else:
            pieces.append(f"[{part.type}: {part.mime_type or 'unknown type'}]")
    if result.structured is not None and not any(p.type == "text" for p in result.parts):
        pieces.append(json.dumps(result.structured, ensure_ascii=False))
    return "\n".join(pieces)


async def _enabled_integration(
    uow: UnitOfWork, loaded: LoadedIntegrations, org_id: OrgId, integration_id: IntegrationId
) -> McpIntegration:
    """The integration as a run's tool assembly (or an earlier call) read it, unless it changed since; else read."""
    integration = loaded.get(org_id, integration_id)
    if integration is None:
        as_of = loaded.version()
        async with uow.read_only() as transaction:
            integration = await load_integration(transaction, org_id, integration_id)
        loaded.remember([integration], as_of=as_of)
    if not integration.enabled:
        raise McpIntegrationDisabled(f"MCP integration {integration.slug!r} is disabled")
    return integration


class ExecuteMcpTool:
    def __init__(
        self, uow: UnitOfWork, secrets: SecretBox, gateway: McpGateway, loaded: LoadedIntegrations | None = None
    ) -> None:
        self._uow, self._secrets, self._gateway = uow, secrets, gateway
        self._loaded = loaded if loaded is not None else LoadedIntegrations.none()

    async def execute(self, command: ExecuteMcpToolCommand) -> McpToolOutcome:
        integration = await _enabled_integration(self._uow, self._loaded, command.org_id, command.integration_id)
        target = target_of(integration, self._secrets)
        tools = await self._gateway.list_tools(target)
        if not any(t.name == command.tool_name for t in tools) or not integration.tool_filter.allows(command.tool_name):
            raise McpToolNotFound(f"integration {integration.slug!r} has no tool {command.tool_name!r}")
        result = await self._gateway.call_tool(target, command.tool_name, command.arguments, command.hooks)
        if isinstance(result, McpInputRequired):
            if not command.may_ask:
                asked = "; ".join(q.message for q in result.questions)
                raise McpInputNeeded(
                    f"tool {command.tool_name!r} asks for the user's input ({asked}): call it in a run, which "
                    "waits for the answers"
                )
            return McpToolOutcome(text="", parts=(), structured=None, is_error=False, input_required=result)
        return McpToolOutcome(
            text=text_for_model(result),
            parts=result.parts,
            structured=result.structured,
            is_error=result.is_error,
        )


@dataclass(frozen=True, kw_only=True)
class GetMcpPromptQuery:
    org_id: OrgId
    integration_id: IntegrationId
    prompt_name: str
    arguments: Mapping[str, str] = field(default_factory=dict)


class GetMcpPrompt:
    """Checks, in this order: the integration is the caller's, it is enabled; then asks the server."""

    def __init__(
        self, uow: UnitOfWork, secrets: SecretBox, gateway: McpGateway, loaded: LoadedIntegrations | None = None
    ) -> None:
        self._uow, self._secrets, self._gateway = uow, secrets, gateway
        self._loaded = loaded if loaded is not None else LoadedIntegrations.none()

    async def execute(self, query: GetMcpPromptQuery) -> PromptResult:
        integration = await _enabled_integration(self._uow, self._loaded, query.org_id, query.integration_id)
        target = target_of(integration, self._secrets)
        prompts = await self._gateway.list_prompts(target)
        if not any(p.name == query.prompt_name for p in prompts):
            raise McpPromptNotFound(f"integration {integration.slug!r} has no prompt {query.prompt_name!r}")
        return await self._gateway.get_prompt(target, query.prompt_name, query.arguments)


@dataclass(frozen=True, kw_only=True)
class ReadMcpResourceQuery:
    org_id: OrgId
    integration_id: IntegrationId
    uri: str


class ReadMcpResource:
    """Reads a resource without importing it."""

    def __init__(self, uow: UnitOfWork, secrets: SecretBox, gateway: McpGateway) -> None:
        self._uow, self._secrets, self._gateway = uow, secrets, gateway

    async def execute(self, query: ReadMcpResourceQuery) -> Sequence[McpResourceContent]:
        async with self._uow.read_only() as uow:
            integration = await load_enabled_integration(uow, query.org_id, query.integration_id)
        return await self._gateway.read_resource(target_of(integration, self._secrets), query.uri)


@dataclass(frozen=True, kw_only=True)
class RetrieveMcpResourceCommand:
    org_id: OrgId
    integration_id: IntegrationId
    uri: str
    thread_id: ThreadId | None = None
    agent_id: AgentId | None = None
    created_by: CreatedBy = CreatedBy.USER

    def __post_init__(self) -> None:
        if (self.thread_id is None) == (self.agent_id is None):
            raise InvalidValue("a resource is imported into exactly one thread or one agent")


@dataclass(frozen=True, kw_only=True)
class ImportedResource:
    sources: Sequence[Source]
    preview: str


def _is_csv(content: McpResourceContent) -> bool:
    return (content.mime_type or "").split(";")[0].strip() in CSV_MIME_TYPES or content.uri.lower().endswith(".csv")


def _name_of(uri: str, catalog_name: str | None) -> str:
    if catalog_name:
        return catalog_name
    tail = uri.rstrip("/").rsplit("/", 1)[-1]
    return (tail or uri)[:500]


class RetrieveMcpResource:
    """Reads a resource and imports it as sources of a thread or an agent: text as text, CSV as a
    table, binary content as a blob (stored, never sent to a model)."""

    def __init__(
        self,
        uow: UnitOfWork,
        clock: Clock,
        ids: IdGenerator,
        secrets: SecretBox,
        gateway: McpGateway,
        max_source_bytes: int,
    ) -> None:
        self._uow, self._clock, self._ids = uow, clock, ids
        self._secrets, self._gateway, self._max_bytes = secrets, gateway, max_source_bytes

    async def execute(self, command: RetrieveMcpResourceCommand) -> ImportedResource:
        async with self._uow.read_only() as uow:
            integration = await load_enabled_integration(uow, command.org_id, command.integration_id)
            await self._check_owner(uow, command)
        target = target_of(integration, self._secrets)
        contents = await self._gateway.read_resource(target, command.uri)
        names = {r.uri: r.name for r in await self._resource_catalog(target)}
        sources = [self._source_of(command, c, names.get(c.uri)) for c in contents]
        async with self._uow as uow:
            await self._check_owner(uow, command)  # the thread or agent may have gone meanwhile
            for source in sources:
                await uow.sources.add(source)
                await uow.passages.replace(source, passages_of(source))
            await uow.commit()
        preview = "\n\n".join(f"{s.name}: {s.preview()}" for s in sources) or "(the resource is empty)"
        return ImportedResource(sources=sources, preview=preview)

    async def _resource_catalog(self, target: McpTarget) -> Sequence[McpResourceInfo]:
        try:
            return await self._gateway.list_resources(target)
        except McpError:  # a name is a nicety: never fail an import for it
            return []

    @staticmethod
    async def _check_owner(uow: UnitOfWork, command: RetrieveMcpResourceCommand) -> None:
        if command.thread_id is not None and await uow.threads.get(command.org_id, command.thread_id) is None:
            raise InvalidReference(f"thread {command.thread_id} not found")
        if command.agent_id is not None and await uow.agents.get(command.org_id, command.agent_id) is None:
            raise InvalidReference(f"agent {command.agent_id} not found")

    def _source_of(
        self, command: RetrieveMcpResourceCommand, content: McpResourceContent, catalog_name: str | None
    ) -> Source:
        common: dict[str, Any] = dict(
            id=SourceId(self._ids.new()),
            org_id=command.org_id,
            thread_id=command.thread_id,
            agent_id=command.agent_id,
            name=_name_of(content.uri, catalog_name),
            origin=SourceOrigin(type="mcp_resource", integration_id=command.integration_id, uri=content.uri),
            mime_type=content.mime_type,
            created_by=command.created_by,
            created_at=self._clock.now(),
        )
        if content.text is not None:
            size = len(content.text.encode())
            self._check_size(size)
            if _is_csv(content):
                rows = list(csv.reader(io.StringIO(content.text)))
                if rows:
                    return Source(kind=SourceKind.DATA, size=size, data=table_from_rows(rows), **common)
            return Source(kind=SourceKind.TEXT, size=size, text=content.text, **common)
        blob = content.blob or b""
        self._check_size(len(blob))
        return Source(kind=SourceKind.BLOB, size=len(blob), blob=blob, **common)

    def _check_size(self, size: int) -> None:
        if size > self._max_bytes:
            raise InvalidValue(f"the resource is {size} bytes; sources are limited to {self._max_bytes} bytes")
