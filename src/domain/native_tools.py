"""Native tools: the types an agent may reference (with their settings), and the schema the model sees."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from domain.errors import InvalidValue
from domain.tools import ToolType

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


@dataclass(frozen=True, kw_only=True)
class NativeToolSpec:
    type: ToolType
    name: str
    description: str
    parameters: Mapping[str, Any]
    # Displayable tools are carried out by the API client (the run pauses for its result).
    displayable: bool = False
    config_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


NATIVE_TOOLS: tuple[NativeToolSpec, ...] = (
    NativeToolSpec(
        type=ToolType.SOURCE_QUERY,
        name="source_query",
        description="Search the sources uploaded or imported into this thread and those attached to the agent: "
        "returns the passages that best match the query, each with its source's name, its location (page, "
        "heading, table row) and ids to cite. Use the words the answer would contain.",
        parameters=_object(
            {
                "query": {"type": "string", "description": "Words to look for"},
                "source_id": {"type": "string", "description": "Only search this source (its source_id)"},
            },
            ["query"],
        ),
    ),
    NativeToolSpec(
        type=ToolType.WEBSITE_CONTENT,
        name="website_content",
        description="Fetch a web page and return its readable text.",
        parameters=_object({"url": {"type": "string", "description": "http(s) URL of the page"}}, ["url"]),
    ),
    NativeToolSpec(
        type=ToolType.INTERNET_SEARCH,
        name="internet_search",
        description="Search the web and return the top results with title, URL and snippet.",
        parameters=_object({"query": {"type": "string", "description": "The search query"}}, ["query"]),
    ),
    NativeToolSpec(
        type=ToolType.SEND_EMAIL,
        name="send_email",
        description="Draft an email for the user to review and send. The user's application sends it.",
        parameters=_object(
            {
                "to": {"type": "array", "items": {"type": "string"}, "description": "Recipients"},
                "subject": {"type": "string"},
                "body": {"type": "string"},
            },
            ["to", "subject", "body"],
        ),
        displayable=True,
    ),
    NativeToolSpec(
        type=ToolType.CREATE_CALENDAR_EVENT,
        name="create_calendar_event",
        description="Propose a calendar event for the user to add. The user's application creates it.",
        parameters=_object(
            {
                "title": {"type": "string"},
                "start": {"type": "string", "description": "ISO 8601 start time"},
                "end": {"type": "string", "description": "ISO 8601 end time"},
                "location": {"type": "string"},
                "description": {"type": "string"},
            },
            ["title", "start", "end"],
        ),
        displayable=True,
    ),
    NativeToolSpec(
        type=ToolType.CODE_EXECUTION,
        name="code_execution",
        description="Run a short Python program and return what it printed.",
        parameters=_object({"code": {"type": "string", "description": "Python source code"}}, ["code"]),
    ),
    NativeToolSpec(
        type=ToolType.COMMAND,
        name="command",
        description="Run a command the operator defined, with the given arguments.",
        parameters=_object(
            {"arguments": {"type": "array", "items": {"type": "string"}, "description": "Command arguments"}},
            [],
        ),
        config_schema=_object(
            {"name": {"type": "string", "description": "Name of an operator-defined command"}}, ["name"]
        ),
    ),
)

NATIVE_TOOLS_BY_TYPE: Mapping[ToolType, NativeToolSpec] = {spec.type: spec for spec in NATIVE_TOOLS}


def _check_config(ref_type: ToolType, config: Mapping[str, Any]) -> None:
    """The config of a tool ref holds exactly the string settings its schema names."""
    spec = NATIVE_TOOLS_BY_TYPE[ref_type]
    properties = spec.config_schema.get("properties", {})
    unknown = sorted(set(config) - set(properties))
    if unknown:
        raise InvalidValue(f"tool {ref_type.value}: unknown config keys {', '.join(unknown)}")
    for name in spec.config_schema.get("required", []):
        if not isinstance(config.get(name), str) or not config[name]:
            raise InvalidValue(f"tool {ref_type.value}: config.{name} is required")


@dataclass(frozen=True, kw_only=True)
class ToolRef:
    """An agent's choice of a native tool, with that tool's configuration."""

    type: ToolType
    config: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.type not in NATIVE_TOOL_TYPES:
            allowed = ", ".join(sorted(t.value for t in NATIVE_TOOL_TYPES))
            raise InvalidValue(f"tool type {self.type.value!r} cannot be referenced by an agent; use one of {allowed}")
        _check_config(self.type, self.config)

    @property
    def key(self) -> tuple[str, str]:
        """What makes two refs the same tool: its type, and for commands the command name."""
        return (self.type.value, str(self.config.get("name", "")))
