from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from uuid import UUID

from domain.errors import InvalidValue
from domain.ids import OrgId


class ToolType(StrEnum):
    """The kind of a tool."""

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


TOOL_NAME_MAX = 64


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
    read_only: bool = False
    """Its server says it only reads (an MCP tool's `readOnlyHint`): a call made twice changes nothing, so it may
    begin before the step asking for it is stored."""

    def __post_init__(self) -> None:
        if not self.name or len(self.name) > TOOL_NAME_MAX:
            raise InvalidValue(f"tool name must be 1-{TOOL_NAME_MAX} characters")
