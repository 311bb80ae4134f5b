"""Request bodies of the OpenAI-compatible routes, and their translation into Threadline's commands.

Fields these routes do not use (temperature, user, n, seed...) are accepted and ignored, as the clients that
speak this format send them; the agent's own model settings apply."""

import json
import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from application.runs.conversations import Turn
from application.runs.submit_tool_results import ToolResultInput
from domain.errors import InvalidValue
from domain.messages import (
    ContentPart,
    ImageContent,
    MessageRole,
    TextContent,
    ToolResultContent,
    ToolUseContent,
)
from domain.runs import INSTRUCTIONS_MAX, ClientTool

_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.DOTALL)
ModelName = Annotated[str, StringConstraints(min_length=1, max_length=200, strict=True)]
MESSAGES_MAX = 1_000
TOOLS_MAX = 64
TOOL_RESULT_MAX = 1_000_000


class OpenAiRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)


# -- Chat Completions ---------------------------------------------------------------------------------------


class FunctionIn(OpenAiRequest):
    """A function the client executes."""

    name: str
    """The function's name"""
    description: str = ""
    """What it does, as the model reads it"""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of its arguments"""


class ChatToolIn(OpenAiRequest):
    """A tool of the client (Chat Completions)."""

    type: Literal["function"]
    """Always `function`"""
    function: FunctionIn
    """The function"""


class ChatToolCallFunctionIn(OpenAiRequest):
    """The function an assistant message called."""

    name: str
    """The function's name"""
    arguments: str = "{}"
    """Its arguments, JSON-encoded"""


class ChatToolCallIn(OpenAiRequest):
    """A tool call of an earlier assistant message."""

    id: str
    """The call's id, which the tool message answers"""
    type: Literal["function"] = "function"
    """Always `function`"""
    function: ChatToolCallFunctionIn
    """The function called"""


class ChatMessageIn(OpenAiRequest):
    """A message of the conversation."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    """Who speaks it"""
    content: str | list[dict[str, Any]] | None = None
    """Text, or a list of content parts"""
    tool_calls: list[ChatToolCallIn] | None = None
    """The calls an assistant message made"""
    tool_call_id: str | None = None
    """The call a tool message answers"""


class StreamOptionsIn(OpenAiRequest):
    """Options of a streamed answer."""

    include_usage: bool = False
    """Send a last chunk with the usage"""


class ChatCompletionIn(OpenAiRequest):
    """A Chat Completions request: the agent named by `model` answers the messages."""

    model: ModelName = Field(description="The slug of the agent that answers")
    messages: list[ChatMessageIn] = Field(min_length=1, max_length=MESSAGES_MAX)
    """The conversation, oldest first"""
    stream: bool = False
    """Answer with Server-Sent Events chunks"""
    stream_options: StreamOptionsIn | None = None
    """Options of the stream"""
    tools: list[ChatToolIn] = Field(
        default_factory=list, max_length=TOOLS_MAX, description="Tools the client runs: the run pauses for them"
    )

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def client_tools(self) -> tuple[ClientTool, ...]:
        return tuple(_client_tool(t.function.name, t.function.description, t.function.parameters) for t in self.tools)

    def instructions(self) -> str | None:
        return _joined([_text_of(m.content) for m in self.messages if m.role in ("system", "developer")])

    def tool_results(self) -> list[ToolResultInput]:
        """The `tool` messages after the last assistant message: results of the calls a run may wait for."""
        trailing: list[ToolResultInput] = []
        for message in reversed(self.messages):
            if message.role in ("system", "developer"):
                continue
            if message.role != "tool":
                break
            trailing.insert(0, _tool_result(message.tool_call_id, _text_of(message.content)))
        return trailing

    def turns(self) -> list[Turn]:
        """The conversation (system messages aside), as the thread will hold it."""
        names: dict[str, str] = {}
        turns: list[Turn] = []
        for message in self.messages:
            match message.role:
                case "user":
                    turns.append(Turn(role=MessageRole.USER, content=_parts(message.content)))
                case "assistant":
                    calls = [_tool_use(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
                    names.update((c.id, c.name) for c in calls)
                    text = _text_of(message.content)
                    content: tuple[ContentPart, ...] = (
                        *([TextContent(text=text)] if text or not calls else []),
                        *calls,
                    )
                    turns.append(Turn(role=MessageRole.ASSISTANT, content=content))
                case "tool":
                    result = _tool_result(message.tool_call_id, _text_of(message.content))
                    _add_result(turns, result, names)
        return turns


# -- Responses ----------------------------------------------------------------------------------------------


class ResponseToolIn(OpenAiRequest):
    """A tool of the client (Responses)."""

    type: str
    """`function` (other tool types are refused)"""
    name: str | None = None
    """The function's name"""
    description: str | None = None
    """What it does, as the model reads it"""
    parameters: dict[str, Any] | None = None
    """JSON Schema of its arguments"""


class ResponseIn(OpenAiRequest):
    """A Responses request: the agent named by `model` answers the input."""

    model: ModelName = Field(description="The slug of the agent that answers")
    input: Annotated[str, StringConstraints(min_length=1, strict=True)] | list[dict[str, Any]] = Field(
        description="Text, or a list of input items (messages, function_call_output...)"
    )
    instructions: str | None = Field(default=None, description="Added to the agent's instructions for this run only")
    previous_response_id: str | None = Field(
        default=None, description="Continue the thread of that response (its run, if it waits for tool results)"
    )
    store: bool = True
    """Keep the response so a later request can continue from it"""
    stream: bool = False
    """Answer with Server-Sent Events"""
    tools: list[ResponseToolIn] = Field(default_factory=list, max_length=TOOLS_MAX)
    """Functions the client executes"""

    def client_tools(self) -> tuple[ClientTool, ...]:
        tools = []
        for tool in self.tools:
            if tool.type != "function" or not tool.name:
                raise InvalidValue(f"tools of type {tool.type!r} are not supported: declare function tools")
            tools.append(_client_tool(tool.name, tool.description or "", tool.parameters))
        return tuple(tools)

    def _items(self) -> list[dict[str, Any]]:
        if isinstance(self.input, str):
            return [{"type": "message", "role": "user", "content": self.input}]
        if len(self.input) > MESSAGES_MAX:
            raise InvalidValue(f"input may hold at most {MESSAGES_MAX} items")
        return self.input

    def all_instructions(self) -> str | None:
        system = [_text_of(i.get("content")) for i in self._items() if _message_role(i) in ("system", "developer")]
        return _joined([self.instructions or "", *system])

    def tool_results(self) -> list[ToolResultInput]:
        return [
            _tool_result(item.get("call_id"), _output_text(item.get("output")))
            for item in self._items()
            if item.get("type") == "function_call_output"
        ]

    def turns(self) -> list[Turn]:
        names: dict[str, str] = {}
        turns: list[Turn] = []
        for item in self._items():
            kind = item.get("type", "message")
            if kind == "message":
                role = _message_role(item)
                if role == "user":
                    turns.append(Turn(role=MessageRole.USER, content=_parts(item.get("content"))))
                elif role == "assistant":
                    turns.append(
                        Turn(role=MessageRole.ASSISTANT, content=(TextContent(text=_text_of(item.get("content"))),))
                    )
            elif kind == "function_call":
                call = _tool_use(str(item.get("call_id", "")), str(item.get("name", "")), item.get("arguments") or "{}")
                names[call.id] = call.name
                turns.append(Turn(role=MessageRole.ASSISTANT, content=(call,)))
            elif kind == "function_call_output":
                result = _tool_result(item.get("call_id"), _output_text(item.get("output")))
                _add_result(turns, result, names)
            elif kind not in ("reasoning", "item_reference"):
                raise InvalidValue(f"input items of type {kind!r} are not supported")
        return turns


# -- shared translation -------------------------------------------------------------------------------------


def _message_role(item: dict[str, Any]) -> str:
    role = item.get("role")
    if item.get("type", "message") != "message":
        return ""
    if role not in ("user", "assistant", "system", "developer"):
        raise InvalidValue(f"an input message's role must be user, assistant, system or developer, not {role!r}")
    return str(role)


def _client_tool(name: str, description: str, parameters: dict[str, Any] | None) -> ClientTool:
    return ClientTool(name=name, description=description, parameters=parameters or {"type": "object", "properties": {}})


def _joined(texts: Sequence[str]) -> str | None:
    joined = "\n\n".join(t.strip() for t in texts if t and t.strip())
    if len(joined) > INSTRUCTIONS_MAX:
        raise InvalidValue(f"system messages and instructions may hold at most {INSTRUCTIONS_MAX} characters")
    return joined or None


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.text for p in _parts(content) if isinstance(p, TextContent))
    raise InvalidValue("message content must be text or a list of content parts")


def _output_text(output: Any) -> str:
    text = _text_of(output)
    if len(text) > TOOL_RESULT_MAX:
        raise InvalidValue(f"a tool result may hold at most {TOOL_RESULT_MAX} characters")
    return text


def _parts(content: Any) -> tuple[ContentPart, ...]:
    if isinstance(content, str) or content is None:
        return (TextContent(text=content or ""),)
    if not isinstance(content, list):
        raise InvalidValue("message content must be text or a list of content parts")
    parts: list[ContentPart] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("text", "input_text", "output_text"):
            text = part.get("text")
            if not isinstance(text, str):
                raise InvalidValue(f"a {kind} part needs its text")
            parts.append(TextContent(text=text))
        elif kind in ("image_url", "input_image"):
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            if not isinstance(url, str):
                raise InvalidValue(f"an {kind} part needs its image URL")
            parts.append(_image(url))
        else:
            raise InvalidValue(f"content parts of type {kind!r} are not supported")
    return tuple(parts) or (TextContent(text=""),)


def _image(url: str) -> ImageContent:
    data = _DATA_URL.match(url)
    if data is not None:
        return ImageContent(data=data["data"], mime_type=data["mime"])
    return ImageContent(url=url)


def _tool_use(call_id: str, name: str, arguments: Any) -> ToolUseContent:
    if not call_id or not name:
        raise InvalidValue("a tool call needs its id and name")
    try:
        params = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError:
        params = {}
    return ToolUseContent(id=call_id, name=name, params=params if isinstance(params, dict) else {})


def _tool_result(call_id: Any, text: str) -> ToolResultInput:
    if not isinstance(call_id, str) or not (1 <= len(call_id) <= 200):
        raise InvalidValue("a tool result needs the id of the call it answers (tool_call_id, call_id)")
    return ToolResultInput(tool_use_id=call_id, result=text)


def _add_result(turns: list[Turn], result: ToolResultInput, names: dict[str, str]) -> None:
    """Results that follow one another make one tool message, as the run loop stores them."""
    part = ToolResultContent(
        tool_use_id=result.tool_use_id, tool_name=names.get(result.tool_use_id, "tool"), result=result.result
    )
    if turns and turns[-1].role is MessageRole.TOOL:
        turns[-1] = Turn(role=MessageRole.TOOL, content=(*turns[-1].content, part))
    else:
        turns.append(Turn(role=MessageRole.TOOL, content=(part,)))
