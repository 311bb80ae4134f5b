"""Prompt templates: named messages with {placeholders}, published as an MCP tool and an MCP prompt."""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from domain.errors import InvalidValue
from domain.ids import AgentId, OrgId
from domain.mcp_prompts import PromptMessage
from domain.text import require_text

DESCRIPTION_MAX = 2_000
CONTENT_MAX = 100_000
ARGUMENTS_MAX = 32
MESSAGES_MAX = 50
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_ARGUMENT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# {name} or {name|default:value}; anything else in braces (JSON, URL templates) is left alone.
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?:\|default:([^{}]*))?\}")
ROLES = frozenset({"system", "developer", "user", "assistant"})


class ArgumentType(StrEnum):
    """The type of a prompt template argument: a string, or an array joined with commas."""

    STRING = "string"
    ARRAY = "array"


class MissingArguments(InvalidValue):
    """Required arguments were not given."""


@dataclass(frozen=True, kw_only=True)
class TemplateArgument:
    name: str
    description: str = ""
    required: bool = False
    type: ArgumentType = ArgumentType.STRING
    default: str | tuple[str, ...] | None = None
    autocomplete: tuple[str, ...] = ()
    """Values to suggest; the organization's earlier values are suggested too when `remember` is set."""
    remember: bool = False

    def __post_init__(self) -> None:
        if not _ARGUMENT_NAME.match(self.name):
            raise InvalidValue(f"argument name {self.name!r} must be a letter or _ then letters, digits or _")
        require_text("argument description", self.description, max_length=DESCRIPTION_MAX, allow_empty=True)

    @property
    def completes(self) -> bool:
        return bool(self.autocomplete) or self.remember


@dataclass(frozen=True, kw_only=True)
class TemplateMessage:
    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidValue(f"message role must be one of {', '.join(sorted(ROLES))}, got {self.role!r}")
        require_text("message content", self.content, max_length=CONTENT_MAX)


ArgumentValue = str | Sequence[str]


def _as_text(value: ArgumentValue) -> str:
    return value if isinstance(value, str) else ", ".join(str(v) for v in value)


@dataclass(kw_only=True)
class PromptTemplate:
    name: str
    description: str
    messages: tuple[TemplateMessage, ...]
    arguments: tuple[TemplateArgument, ...] = ()
    agent_id: AgentId | None = None
    """The agent that answers the rendered prompt."""
    org_id: OrgId | None = None
    """None for templates read from the prompts directory (the configuration assigns them)."""
    origin: str = "api"
    """"api", or the file the template was read from."""
    created_at: datetime | None = None
    updated_at: datetime | None = None
    tools: tuple[str, ...] = field(default_factory=tuple)
    """Tool names a ChatMD file declared (informational)."""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise InvalidValue(f"template name {self.name!r} must be 1-64 letters, digits, - or _")
        require_text("description", self.description, max_length=DESCRIPTION_MAX, allow_empty=True)
        if not self.messages or len(self.messages) > MESSAGES_MAX:
            raise InvalidValue(f"a template has 1-{MESSAGES_MAX} messages")
        if len(self.arguments) > ARGUMENTS_MAX:
            raise InvalidValue(f"a template has at most {ARGUMENTS_MAX} arguments")
        names = [a.name for a in self.arguments]
        if len(set(names)) != len(names):
            raise InvalidValue("argument names must be unique")

    @property
    def tool_name(self) -> str:
        """Its MCP tool name: hyphens become underscores."""
        return self.name.replace("-", "_")

    def argument(self, name: str) -> TemplateArgument | None:
        return next((a for a in self.arguments if a.name == name), None)

    def render(self, values: Mapping[str, ArgumentValue]) -> tuple[PromptMessage, ...]:
        """The messages with arguments substituted in one pass, so text that came from an argument is
        never expanded again. Placeholders that are not declared arguments stay exactly as written."""
        missing = [a.name for a in self.arguments if a.required and not _given(values.get(a.name))]
        if missing:
            raise MissingArguments(f"missing required arguments: {', '.join(missing)}")

        def substitute(match: re.Match[str]) -> str:
            name, inline_default = match.group(1), match.group(2)
            argument = self.argument(name)
            if argument is None:
                return match.group(0)
            value = values.get(name)
            if _given(value):
                return _as_text(value)  # type: ignore[arg-type]
            if inline_default is not None:
                return inline_default
            if argument.default is not None:
                return _as_text(argument.default)
            return ""

        return tuple(PromptMessage(role=m.role, content=_PLACEHOLDER.sub(substitute, m.content)) for m in self.messages)

    def instructions(self, values: Mapping[str, ArgumentValue]) -> str:
        """What its MCP prompt says: use the tool, with these arguments."""
        lines = [f"Use the {self.tool_name} tool to {_lower_first(self.description) or 'run this prompt'}", ""]
        if self.arguments:
            lines.append("Call it with the following arguments:")
            for argument in self.arguments:
                value = values.get(argument.name)
                if _given(value):
                    shown = _as_text(value)  # type: ignore[arg-type]
                elif argument.required:
                    shown = "<required, not provided>"
                else:
                    shown = "<optional, not provided>"
                lines.append(f"  - {argument.name}: {shown}")
        return "\n".join(lines).rstrip()

    def input_schema(self) -> dict[str, object]:
        properties: dict[str, object] = {}
        for argument in self.arguments:
            schema: dict[str, object] = (
                {"type": "array", "items": {"type": "string"}}
                if argument.type is ArgumentType.ARRAY
                else {"type": "string"}
            )
            if argument.description:
                schema["description"] = argument.description
            properties[argument.name] = schema
        return {
            "type": "object",
            "properties": properties,
            "required": [a.name for a in self.arguments if a.required],
        }


def _given(value: ArgumentValue | None) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        return value != ""
    return len(value) > 0


def _lower_first(text: str) -> str:
    text = text.strip().rstrip(".")
    return text[:1].lower() + text[1:] if text else ""


def declared_placeholders(content: str) -> list[str]:
    """The placeholder names a text uses, in order of first use."""
    return list(dict.fromkeys(m.group(1) for m in _PLACEHOLDER.finditer(content)))


def defaulted_placeholders(content: str) -> set[str]:
    """The placeholder names that carry an inline default ({name|default:value}) somewhere in the text."""
    return {m.group(1) for m in _PLACEHOLDER.finditer(content) if m.group(2) is not None}


def joined(messages: Sequence[PromptMessage]) -> str:
    """A rendered prompt as one input for an agent: user text as is, other roles labelled."""
    if len(messages) == 1 and messages[0].role == "user":
        return messages[0].content
    return "\n\n".join(m.content if m.role == "user" else f"{m.role.capitalize()}: {m.content}" for m in messages)
