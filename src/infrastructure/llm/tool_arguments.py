"""Parsing of the JSON arguments a model sends with a tool call."""

import json
from typing import Any

_EXCERPT = 200


def parse_tool_arguments(tool_name: str, raw: str) -> tuple[dict[str, Any], str | None]:
    """The arguments as a dict, or an empty dict and the reason they could not be used."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        return {}, f"the arguments for {tool_name} are not valid JSON ({error.msg}): {_excerpt(raw)}"
    if not isinstance(value, dict):
        return {}, f"the arguments for {tool_name} must be a JSON object, not {_json_kind(value)}"
    return value, None


def _excerpt(raw: str) -> str:
    return raw if len(raw) <= _EXCERPT else raw[:_EXCERPT] + "..."


def _json_kind(value: Any) -> str:
    match value:
        case list():
            return "an array"
        case str():
            return "a string"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case None:
            return "null"
    return type(value).__name__
