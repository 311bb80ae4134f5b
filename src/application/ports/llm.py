"""The language model port: one call of a chat model with tools, optionally streaming its text."""

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from domain.agents import ModelSettings
from domain.messages import Message
from domain.usage import Usage


@dataclass(frozen=True, kw_only=True)
class ToolDefinition:
    """A tool as the model sees it: a function name (<= 64 chars of [a-zA-Z0-9_-]) and a JSON Schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    @cached_property
    def parameters_json(self) -> str:
        """The JSON Schema as JSON text (made once: a run's requests measure it at every step)."""
        return json.dumps(dict(self.parameters), ensure_ascii=False)


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    model: str
    instructions: str
    """The system prompt; empty for none."""
    messages: Sequence[Message]
    """The conversation so far, oldest first: user, assistant (text and tool_use parts) and tool messages."""
    tools: Sequence[ToolDefinition] = ()
    settings: ModelSettings = field(default_factory=ModelSettings)
    parallel_tool_calls: bool = True


@dataclass(frozen=True, kw_only=True)
class ModelToolCall:
    id: str
    name: str
    arguments: Mapping[str, Any]
    """Parsed JSON arguments. When the model sent text that is not a JSON object, this is empty and
    `arguments_error` says why, so the loop can tell the model instead of calling the tool."""
    arguments_error: str | None = None


@dataclass(frozen=True, kw_only=True)
class ModelResponse:
    text: str
    tool_calls: Sequence[ModelToolCall] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str = ""
    """The model that answered, as the provider names it."""


TextListener = Callable[[str], Awaitable[None]]


class LanguageModel(Protocol):
    async def complete(self, request: ModelRequest, on_text: TextListener | None = None) -> ModelResponse:
        """Call the model once. With `on_text`, the answer is streamed and each text delta is passed
        to it as it arrives; the returned response is the same either way. Raises ModelError."""
        ...
