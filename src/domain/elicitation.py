"""Elicitation: a question an integrated MCP server asks the user in the middle of a tool call, and the answer.

The run that made the call waits for the answer (`requires_action`); the tool call is then carried on with it.
The question's form is the restricted JSON Schema MCP allows for elicitation: an object of flat properties, each
a string (maybe an enum, with a length or a format), a number or integer (maybe bounded), a boolean, or an array
of strings from an enum (a multiple choice).
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from enum import StrEnum
from typing import Any

from domain.errors import InvalidValue

MESSAGE_MAX = 10_000
"""A question's message is kept up to this many characters."""

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:\S+$")


class ElicitationAction(StrEnum):
    """How the user answered a question: accept (with the values), decline or cancel."""

    ACCEPT = "accept"
    """The user answered (the answer's content holds the values)."""
    DECLINE = "decline"
    """The user refused to answer."""
    CANCEL = "cancel"
    """The user dismissed the question without choosing."""


@dataclass(frozen=True, kw_only=True)
class ElicitationAnswer:
    action: ElicitationAction
    content: Mapping[str, Any] | None = None
    """The values, for `accept` only."""
    lease: int = 0
    """The lease of the run when it was answered: the tool call is carried on only by the next taker of the run
    (a later one finds it may have been carried on already, by a process that was lost)."""


@dataclass(frozen=True, kw_only=True)
class Elicitation:
    """One question of one tool call's server, as the run waits for its answer."""

    id: str
    """Unique in the run: the tool call's id and the server's key for the question."""
    tool_call_id: str
    tool_name: str
    key: str
    """The server's key for the question (its answer is sent back under it)."""
    message: str
    requested_schema: Mapping[str, Any]
    request_state: str | None = field(default=None, repr=False)
    """The server's opaque state of the call, sent back with the answers (2026-07-28 servers)."""
    answer: ElicitationAnswer | None = None
    live: bool = False
    """Asked during the call (handshake-era servers: `elicitation/create`): the call is still open, in the process
    that executes the run, and takes the answer there; it is not made again."""

    @classmethod
    def asked(
        cls,
        *,
        tool_call_id: str,
        tool_name: str,
        key: str,
        message: str,
        requested_schema: Mapping[str, Any],
        request_state: str | None = None,
        live: bool = False,
    ) -> "Elicitation":
        return cls(
            id=f"{tool_call_id}:{key}",
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            key=key,
            message=message[:MESSAGE_MAX],
            requested_schema=dict(requested_schema),
            request_state=request_state,
            live=live,
        )

    def answered(self, answer: ElicitationAnswer) -> "Elicitation":
        """This question with its answer, checked against the question's form."""
        if answer.action is ElicitationAction.ACCEPT:
            check_content(self.requested_schema, answer.content or {}, where=self.id)
        elif answer.content:
            raise InvalidValue(f"elicitation {self.id}: content goes only with accept, not {answer.action.value}")
        content = dict(answer.content or {}) if answer.action is ElicitationAction.ACCEPT else None
        return replace(self, answer=ElicitationAnswer(action=answer.action, content=content, lease=answer.lease))


def check_content(schema: Mapping[str, Any], content: Mapping[str, Any], *, where: str) -> None:
    """Raise InvalidValue naming every value of `content` its form refuses (missing, unknown, wrong type...)."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    problems: list[str] = []
    for name in required if isinstance(required, list) else []:
        if name not in content or content[name] is None:
            problems.append(f"{name!s} is required")
    for name, value in content.items():
        definition = properties.get(name)
        if not isinstance(definition, Mapping):
            problems.append(f"{name} is not asked for")
        elif value is not None:
            problem = _check_value(definition, value)
            if problem:
                problems.append(f"{name} {problem}")
    if problems:
        raise InvalidValue(f"elicitation {where}: " + "; ".join(problems))


def _options(definition: Mapping[str, Any]) -> list[Any] | None:
    if isinstance(definition.get("enum"), list):
        return list(definition["enum"])
    for key in ("oneOf", "anyOf"):
        if isinstance(definition.get(key), list):
            return [o.get("const") for o in definition[key] if isinstance(o, Mapping)]
    return None


def _check_value(definition: Mapping[str, Any], value: Any) -> str | None:
    kind = definition.get("type")
    match kind:
        case "string":
            return _check_string(definition, value)
        case "number" | "integer":
            is_number = isinstance(value, int | float) and not isinstance(value, bool)
            if not is_number or (kind == "integer" and not float(value).is_integer()):
                return f"must be {'an integer' if kind == 'integer' else 'a number'}"
            if isinstance(definition.get("minimum"), int | float) and value < definition["minimum"]:
                return f"must be at least {definition['minimum']}"
            if isinstance(definition.get("maximum"), int | float) and value > definition["maximum"]:
                return f"must be at most {definition['maximum']}"
            return None
        case "boolean":
            return None if isinstance(value, bool) else "must be true or false"
        case "array":
            items = definition.get("items")
            options = _options(items) if isinstance(items, Mapping) else None
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return "must be a list of strings"
            if options is not None and any(v not in options for v in value):
                return f"must be chosen from {', '.join(map(str, options))}"
            if isinstance(definition.get("minItems"), int) and len(value) < definition["minItems"]:
                return f"needs at least {definition['minItems']} choices"
            if isinstance(definition.get("maxItems"), int) and len(value) > definition["maxItems"]:
                return f"takes at most {definition['maxItems']} choices"
            return None
    return None  # a form MCP does not define: the server judges the value


def _check_string(definition: Mapping[str, Any], value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    options = _options(definition)
    if options is not None and value not in options:
        return f"must be one of {', '.join(map(str, options))}"
    if isinstance(definition.get("minLength"), int) and len(value) < definition["minLength"]:
        return f"must be at least {definition['minLength']} characters"
    if isinstance(definition.get("maxLength"), int) and len(value) > definition["maxLength"]:
        return f"must be at most {definition['maxLength']} characters"
    return _check_format(definition.get("format"), value)


def _check_format(form: Any, value: str) -> str | None:
    if form == "email" and not _EMAIL.match(value):
        return "must be an email address"
    if form == "uri" and not _URI.match(value):
        return "must be a URI"
    try:
        if form == "date":
            date.fromisoformat(value)
        elif form == "date-time":
            datetime.fromisoformat(value)
    except ValueError:
        return f"must be a {form} (ISO 8601)"
    return None
