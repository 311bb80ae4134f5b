"""Which tools the model is offered in a run, and under which names."""

import asyncio
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from application.errors import McpError
from application.loaded_integrations import LoadedIntegrations
from application.mcp_access import target_of
from application.ports.llm import ToolDefinition
from application.ports.mcp import McpGateway, McpPromptInfo, McpResourceInfo, McpResourceTemplateInfo, McpToolInfo
from application.ports.native_tools import CodeSandbox, CommandRunner, WebSearch
from application.ports.persistence import UnitOfWork
from application.ports.security import SecretBox
from domain.agents import Agent
from domain.integrations import McpIntegration
from domain.native_tools import NATIVE_TOOLS_BY_TYPE, ToolRef
from domain.runs import ClientTool
from domain.tools import TOOL_NAME_MAX, Tool, ToolType

logger = logging.getLogger(__name__)

RETRIEVE_PROMPT = "retrieve_mcp_prompt"
RETRIEVE_RESOURCE = "retrieve_mcp_resource"
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
_LISTING_MAX = 4_000


def tool_name(raw: str) -> str:
    """A function name models accept: [a-zA-Z0-9_-], at most 64 characters."""
    return _INVALID.sub("_", raw)[:TOOL_NAME_MAX] or "tool"


def _unique(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    for n in range(2, 1000):
        suffix = f"_{n}"
        candidate = name[: TOOL_NAME_MAX - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
    raise RuntimeError("too many tools with the same name")


@dataclass(frozen=True, kw_only=True)
class AssembledTools:
    """The tools one run offers the model, by their unique names."""

    tools: tuple[Tool, ...] = ()
    warnings: tuple[str, ...] = ()

    @cached_property
    def _by_name(self) -> dict[str, Tool]:
        return {t.name: t for t in self.tools}

    def get(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    def type_of(self, name: str) -> str:
        """The tool's type, or "unknown" for a name the run does not offer."""
        tool = self.get(name)
        return tool.type.value if tool else "unknown"

    def waits_for_client(self, name: str) -> bool:
        tool = self.get(name)
        return tool is not None and not tool.executable

    def only_read(self, names: Iterable[str]) -> bool:
        """Whether every one of these tools only reads (see Tool.read_only)."""
        return all((tool := self.get(name)) is not None and tool.read_only for name in names)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    def definitions(self) -> list[ToolDefinition]:
        return list(self._definitions)

    @cached_property
    def _definitions(self) -> tuple[ToolDefinition, ...]:
        return tuple(
            ToolDefinition(name=t.name, description=t.description, parameters=t.parameters) for t in self.tools
        )


@dataclass(frozen=True, kw_only=True)
class _Discovered:
    integration: McpIntegration
    tools: Sequence[McpToolInfo] = ()
    prompts: Sequence[McpPromptInfo] = ()
    resources: Sequence[McpResourceInfo] = ()
    templates: Sequence[McpResourceTemplateInfo] = ()
    error: str | None = None


def _prompt_tool(listing: str) -> Tool:
    return Tool(
        name=RETRIEVE_PROMPT,
        description=(
            "Retrieve a prompt template from an MCP integration. Prompts are predefined conversational "
            "templates that provide structured guidance for specific tasks. Use this when you need reusable "
            "prompt patterns from MCP servers." + listing
        ),
        parameters={
            "type": "object",
            "properties": {
                "integrationId": {
                    "type": "string",
                    "description": "The ID of the MCP integration to retrieve the prompt from",
                },
                "promptName": {
                    "type": "string",
                    "description": "The name of the prompt template to retrieve",
                },
                "arguments": {
                    "type": "object",
                    "description": "Optional arguments for prompt template substitution",
                    "additionalProperties": True,
                },
            },
            "required": ["integrationId", "promptName"],
        },
        type=ToolType.MCP_PROMPT,
    )


def _resource_tool(listing: str) -> Tool:
    return Tool(
        name=RETRIEVE_RESOURCE,
        description=(
            "Read a resource from an MCP integration and import it into this conversation as a source, "
            "which you can then search with source_query (when available). You receive a short preview." + listing
        ),
        parameters={
            "type": "object",
            "properties": {
                "integrationId": {
                    "type": "string",
                    "description": "The ID of the MCP integration that has the resource",
                },
                "uri": {"type": "string", "description": "The URI of the resource"},
            },
            "required": ["integrationId", "uri"],
        },
        type=ToolType.MCP_RESOURCE,
    )


def _prompt_listing(found: Iterable[_Discovered]) -> str:
    lines = []
    for item in found:
        if item.error is not None:
            continue
        prompts = ", ".join(
            p.name + (f"({', '.join(a.name for a in p.arguments)})" if p.arguments else "") for p in item.prompts
        )
        lines.append(f"- {item.integration.id} ({item.integration.name}): {prompts or 'no prompts'}")
    return _listing("Integrations and their prompts", lines)


def _resource_listing(found: Iterable[_Discovered]) -> str:
    lines = []
    for item in found:
        if item.error is not None:
            continue
        resources = [f"{r.uri} ({r.name})" for r in item.resources]
        resources += [f"{t.uri_template} (template: {t.name})" for t in item.templates]
        lines.append(f"- {item.integration.id} ({item.integration.name}): {', '.join(resources) or 'no resources'}")
    return _listing("Integrations and their resources", lines)


def _listing(title: str, lines: list[str]) -> str:
    text = f"\n\n{title}:\n" + "\n".join(lines) if lines else ""
    return text if len(text) <= _LISTING_MAX else text[:_LISTING_MAX] + "\n…"


class _Offer:
    """The tools a run offers as they are gathered: each name once."""

    def __init__(self) -> None:
        self.tools: list[Tool] = []
        self.taken: set[str] = set()
        self.warnings: list[str] = []

    def add(self, tool: Tool) -> None:
        self.tools.append(tool)
        self.taken.add(tool.name)


def _sub_agent_tool(sub: Agent, taken: set[str]) -> Tool:
    return Tool(
        name=_unique(tool_name(f"agent__{sub.slug}"), taken),
        description=f"Delegate a task to the agent '{sub.name}'"
        + (f": {sub.description}" if sub.description else ". ")
        + " Give it the whole task as input; you receive its final answer.",
        parameters={
            "type": "object",
            "properties": {"input": {"type": "string", "description": "The task for the agent"}},
            "required": ["input"],
        },
        type=ToolType.AGENT,
        metadata={"agent_id": str(sub.id)},
    )


def _client_tool(tool: ClientTool) -> Tool:
    return Tool(
        name=tool.name,
        description=tool.description,
        parameters=tool.parameters,
        type=ToolType.CLIENT,
        displayable=True,
        executable=False,
    )


def _offer_mcp_tools(item: _Discovered, offer: _Offer) -> None:
    """The integration's tools, as `<slug>__<tool>`; a name already taken gets a numbered suffix."""
    for remote in item.tools:
        wanted = tool_name(item.integration.tool_prefix + remote.name)
        name = _unique(wanted, offer.taken)
        if name != wanted:
            logger.warning(
                "MCP tool name collision resolved",
                extra={"integration_id": str(item.integration.id), "tool": remote.name, "offered_as": name},
            )
        offer.add(
            Tool(
                name=name,
                description=remote.description or remote.title or remote.name,
                parameters=remote.input_schema,
                type=ToolType.MCP_TOOL,
                metadata={"integration_id": str(item.integration.id), "tool_name": remote.name},
                read_only=remote.read_only,
            )
        )


@dataclass(frozen=True, kw_only=True)
class Reserved:
    names: frozenset[str]
    prefixes: tuple[str, ...]

    def clash(self, name: str) -> str | None:
        """Why a client tool may not have this name, if it may not."""
        if name in self.names:
            return f"client tool {name!r} has the name of one of the agent's tools; give it another name"
        prefix = next((p for p in self.prefixes if name.startswith(p)), None)
        if prefix is not None:
            return f"client tool {name!r} is named like the tools of the MCP integration {prefix[:-2]!r}"
        return None


def reserved_names(agent: Agent, sub_agents: Sequence[Agent], integrations: Sequence[McpIntegration]) -> Reserved:
    """The names of the agent's own tools, and the prefixes of its integrations' tools: a client tool may
    take neither (the model would see two functions of one name, and one could never be called)."""
    names: set[str] = set()
    for ref in agent.tools:
        spec = NATIVE_TOOLS_BY_TYPE[ref.type]
        names.add(tool_name(f"command__{ref.config.get('name', '')}") if ref.type is ToolType.COMMAND else spec.name)
    names.update(tool_name(f"agent__{sub.slug}") for sub in sub_agents)
    if agent.mcp_integration_ids:
        names.update((RETRIEVE_PROMPT, RETRIEVE_RESOURCE))
    return Reserved(names=frozenset(names), prefixes=tuple(i.tool_prefix for i in integrations))


class ToolAssembler:
    """Builds a run's tools: the agent's native tools, sub-agents, the retrieval tools and the MCP tools
    of its enabled integrations (discovered in parallel; one that fails is skipped with a warning), and
    the client's tools. Names are unique: MCP tools give way (a numbered suffix) when a name is taken."""

    def __init__(
        self,
        uow: UnitOfWork,
        secrets: SecretBox,
        gateway: McpGateway,
        commands: CommandRunner,
        search: WebSearch,
        sandbox: CodeSandbox,
        loaded: LoadedIntegrations | None = None,
    ) -> None:
        self._uow, self._secrets, self._gateway = uow, secrets, gateway
        self._commands, self._search, self._sandbox = commands, search, sandbox
        self._loaded = loaded if loaded is not None else LoadedIntegrations.none()

    async def assemble(self, agent: Agent, client_tools: Sequence[ClientTool] = ()) -> AssembledTools:
        offer = _Offer()
        integrations, sub_agents = await self._read(agent)
        for ref in agent.tools:
            native = self._native(ref, offer.warnings)
            if native is not None and native.name not in offer.taken:
                offer.add(native)
        if len(sub_agents) < len(agent.sub_agent_ids):
            offer.warnings.append("a sub-agent of this agent no longer exists")
        for sub in sub_agents:
            offer.add(_sub_agent_tool(sub, offer.taken))
        for client_tool in client_tools:
            if client_tool.name in offer.taken:  # the agent gained a tool of that name after the run was created
                offer.warnings.append(f"client tool '{client_tool.name}' has the name of one of the agent's tools")
                continue
            offer.add(_client_tool(client_tool))
        found = await self._discover_enabled(agent, integrations, offer.warnings)
        if agent.mcp_integration_ids:
            for retrieval in (_prompt_tool(_prompt_listing(found)), _resource_tool(_resource_listing(found))):
                if retrieval.name not in offer.taken:
                    offer.add(retrieval)
        for item in sorted(found, key=lambda d: d.integration.slug):
            if item.error is not None:
                offer.warnings.append(f"MCP integration '{item.integration.slug}' was skipped: {item.error}")
            else:
                _offer_mcp_tools(item, offer)
        return AssembledTools(tools=tuple(offer.tools), warnings=tuple(offer.warnings))

    async def _read(self, agent: Agent) -> tuple[list[McpIntegration], list[Agent]]:
        """The agent's integrations (those loaded lately, unless changed since: no read) and its sub-agents."""
        loaded = [self._loaded.get(agent.org_id, i) for i in agent.mcp_integration_ids]
        if all(i is not None for i in loaded) and not agent.sub_agent_ids:
            return [i for i in loaded if i is not None], []
        as_of = self._loaded.version()
        async with self._uow.read_only() as uow:
            integrations = await uow.integrations.get_many(agent.org_id, agent.mcp_integration_ids)
            sub_agents = [a for a in [await uow.agents.get(agent.org_id, i) for i in agent.sub_agent_ids] if a]
        self._loaded.remember(integrations, as_of=as_of)
        by_id = {i.id: i for i in integrations}
        return [by_id[i] for i in agent.mcp_integration_ids if i in by_id], sub_agents

    async def _discover_enabled(
        self, agent: Agent, integrations: Sequence[McpIntegration], warnings: list[str]
    ) -> list[_Discovered]:
        """The catalogs of the agent's enabled integrations, discovered at once; the others are warnings."""
        known = {i.id for i in integrations}
        for missing in [i for i in agent.mcp_integration_ids if i not in known]:
            warnings.append(f"MCP integration {missing} no longer exists; it was skipped")
        for disabled in [i for i in integrations if not i.enabled]:
            warnings.append(f"MCP integration '{disabled.slug}' is disabled; its tools are not offered")
        enabled = [i for i in integrations if i.enabled]
        if len(enabled) == 1:  # no task to wait for (its catalog is usually known: see McpGateway.catalog)
            return [await self._discover(enabled[0])]
        return list(await asyncio.gather(*(self._discover(i) for i in enabled)))

    async def _discover(self, integration: McpIntegration) -> _Discovered:
        target = target_of(integration, self._secrets)
        try:
            catalog = await self._gateway.catalog(target)
        except McpError as error:
            logger.warning(
                "MCP integration discovery failed",
                extra={"integration_id": str(integration.id), "error": error.detail},
            )
            return _Discovered(integration=integration, error=error.detail)
        allowed = [t for t in catalog.tools if integration.tool_filter.allows(t.name)]
        return _Discovered(
            integration=integration,
            tools=allowed,
            prompts=catalog.prompts,
            resources=catalog.resources,
            templates=catalog.templates,
        )

    def _native(self, ref: ToolRef, warnings: list[str]) -> Tool | None:
        spec = NATIVE_TOOLS_BY_TYPE[ref.type]
        common: Mapping[str, Any] = {
            "type": ref.type,
            "displayable": spec.displayable,
            "executable": not spec.displayable,
        }
        if ref.type is ToolType.COMMAND:
            name = str(ref.config.get("name", ""))
            command = next((c for c in self._commands.commands() if c.name == name), None)
            if command is None:
                warnings.append(f"command '{name}' is not defined by the operator; it was skipped")
                return None
            return Tool(
                name=tool_name(f"command__{name}"),
                description=command.description,
                parameters=spec.parameters,
                metadata={"command": name},
                **common,
            )
        if ref.type is ToolType.INTERNET_SEARCH and not self._search.available:
            warnings.append("internet_search is not configured on this server; it was skipped")
            return None
        if ref.type is ToolType.CODE_EXECUTION and not self._sandbox.available:
            warnings.append("code_execution is not enabled on this server; it was skipped")
            return None
        return Tool(name=spec.name, description=spec.description, parameters=spec.parameters, **common)
