from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from uuid import UUID

from domain.errors import InvalidValue
from domain.ids import OrgId


class ToolType(StrEnum):
    CODE_EXECUTION = "code_execution"
    WEBSITE_CONTENT = "website_content"
    SEND_EMAIL = "send_email"
    CREATE_CALENDAR_EVENT = "create_calendar_event"
    INTERNET_SEARCH = "internet_search"
    SOURCE_QUERY = "source_query"
    MCP_TOOL = "mcp_tool"
    MCP_RESOURCE = "mcp_resource"
    MCP_PROMPT = "mcp_prompt"
    AGENT = "agent"
    CLIENT = "client"
    COMMAND = "command"


# Types an agent may list in its tool refs. The others are assembled per run: MCP tools from the
# agent's integrations, sub-agents from its sub-agent ids, client tools from the run request.
NATIVE_TOOL_TYPES: frozenset[ToolType] = frozenset(
    {
        ToolType.CODE_EXECUTION,
        ToolType.WEBSITE_CONTENT,
        ToolType.SEND_EMAIL,
        ToolType.CREATE_CALENDAR_EVENT,
        ToolType.INTERNET_SEARCH,
        ToolType.SOURCE_QUERY,
        ToolType.COMMAND,
    }
)

TOOL_NAME_MAX = 64


@dataclass(frozen=True, kw_only=True)
class ToolRef:
    """An agent's choice of a native tool, with that tool's configuration."""

    type: ToolType
    config: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.type not in NATIVE_TOOL_TYPES:
            allowed = ", ".join(sorted(t.value for t in NATIVE_TOOL_TYPES))
            raise InvalidValue(f"tool type {self.type.value!r} cannot be referenced by an agent; use one of {allowed}")

    @property
    def key(self) -> tuple[str, str]:
        """What makes two refs the same tool: its type, and for commands the command name."""
        return (self.type.value, str(self.config.get("name", "")))


@dataclass(frozen=True, kw_only=True)
class Tool:
    """A tool as offered to the model in one run. Built-ins and per-run tools have no id or org."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    type: ToolType
    displayable: bool = False
    executable: bool = True
    id: UUID | None = None
    org_id: OrgId | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or len(self.name) > TOOL_NAME_MAX:
            raise InvalidValue(f"tool name must be 1-{TOOL_NAME_MAX} characters")
