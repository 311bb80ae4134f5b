"""Fitting a run's request into the model's context window: instructions, tool definitions and as much of the
thread's recent history as fits, with room kept for the answer.

Tokens are estimated, not counted by the model's tokenizer: a character is a quarter of a token (about right
for English text and JSON with OpenAI's tokenizers, generous for code), plus a fixed overhead per chat message,
per tool call and per tool definition for the structure around them. The estimate errs on the high side for
prose, so a request fitted to it stays within the real window.

What is kept, newest first:
- the latest user message, always, and the newest messages (the model must see the results of its last calls);
- an assistant message with tool calls goes with the tool messages holding their results, or neither does
  (never a result without its call, never a call without its results);
- older messages, newest first, while they fit; the first one that does not fit ends the history (older ones
  are dropped too, so the model reads a contiguous recent stretch of the thread);
- where tool results do not fit, they are cut to the room left, each with a marker saying how much was cut,
  rather than dropped, when at least MIN_RESULT_TOKENS per result remain.
"""

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from application.ports.llm import ToolDefinition
from domain.messages import (
    ContentPart,
    ImageContent,
    Message,
    MessageRole,
    TextContent,
    ToolResultContent,
    ToolUseContent,
)

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 12
"""Role, separators and keys around one chat message (generously: a tokenizer counts about 4)."""
TOOL_CALL_OVERHEAD_TOKENS = 20
"""Id, type and function wrapper of one tool call."""
TOOL_DEFINITION_OVERHEAD_TOKENS = 20
"""Function wrapper of one tool definition."""
IMAGE_TOKENS = 800
"""An image, whatever its size (a detailed 1024x1024 image costs about 765 tokens with OpenAI's models)."""
MIN_RESULT_TOKENS = 64
"""The least room worth giving a cut tool result; with less, its step is dropped instead (unless it is the newest)."""


def text_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def tool_tokens(tools: Sequence[ToolDefinition]) -> int:
    """The estimated tokens of the tool definitions a request offers."""
    return sum(
        TOOL_DEFINITION_OVERHEAD_TOKENS
        + text_tokens(tool.name)
        + text_tokens(tool.description)
        + text_tokens(tool.parameters_json)
        for tool in tools
    )


def _part_tokens(part: ContentPart) -> int:
    match part:
        case TextContent(text=text):
            return text_tokens(text)
        case ToolUseContent(id=id_, name=name, params=params):
            arguments = json.dumps(dict(params), ensure_ascii=False)
            return TOOL_CALL_OVERHEAD_TOKENS + text_tokens(id_) + text_tokens(name) + text_tokens(arguments)
        case ToolResultContent(tool_use_id=tid, result=result):
            return MESSAGE_OVERHEAD_TOKENS + text_tokens(tid) + text_tokens(result)  # one chat message per result
        case ImageContent():
            return IMAGE_TOKENS
    return 0


def message_tokens(message: Message) -> int:
    """The estimated tokens of a message as the model receives it."""
    overhead = 0 if message.role is MessageRole.TOOL else MESSAGE_OVERHEAD_TOKENS
    return overhead + sum(_part_tokens(part) for part in message.content)


def request_tokens(instructions: str, tools: Sequence[ToolDefinition], messages: Sequence[Message]) -> int:
    """The estimated tokens of a whole request: its instructions, tool definitions and messages."""
    system = MESSAGE_OVERHEAD_TOKENS + text_tokens(instructions) if instructions.strip() else 0
    return system + tool_tokens(tools) + sum(message_tokens(m) for m in messages)


@dataclass(frozen=True, kw_only=True)
class ContextFit:
    """The messages a request sends, and what was left out of them."""

    messages: tuple[Message, ...]
    messages_dropped: int = 0
    """Messages of the thread (oldest ones) the request leaves out."""
    tool_results_cut: int = 0
    """Tool results the request sends shortened."""
    estimated_tokens: int = 0
    """The request's estimated tokens (instructions, tool definitions and messages)."""
    budget_tokens: int = 0
    """The tokens a request may take: the context window less the room kept for the answer."""
    messages_summarized: int = 0
    """Of the messages dropped, how many a summary sent in their place covers."""

    @property
    def trimmed(self) -> bool:
        return self.messages_dropped > 0 or self.tool_results_cut > 0


def cut_marker(omitted: int) -> str:
    return f"\n[... {omitted} more characters of this tool result were cut to fit the model's context window]"


def fit_context(
    *, instructions: str, tools: Sequence[ToolDefinition], history: Sequence[Message], budget_tokens: int
) -> ContextFit:
    """The newest history that fits `budget_tokens` with the instructions and tools (see the module's rules)."""
    units = _units(history)
    fixed = request_tokens(instructions, tools, ())
    last_user = _last_user_unit(units)
    room = budget_tokens - fixed - (_tokens(units[last_user]) if last_user is not None else 0)
    kept: list[tuple[Message, ...]] = []
    cut = 0
    for index in range(len(units) - 1, -1, -1):
        unit = units[index]
        if index == last_user:
            kept.append(unit)  # its room was kept from the start
            continue
        cost = _tokens(unit)
        if cost <= room:
            kept.append(unit)
            room -= cost
            continue
        newest = index == len(units) - 1
        shortened, count = _cut_results(unit, room, force=newest)
        if shortened is not None:
            kept.append(shortened)
            cut += count
            room -= _tokens(shortened)
        elif newest:
            kept.append(unit)  # the model must see what it was last told, even over budget
            room -= cost
        if last_user is not None and last_user < index:
            kept.append(units[last_user])
        break
    messages = tuple(m for unit in reversed(kept) for m in unit)
    return ContextFit(
        messages=messages,
        messages_dropped=len(history) - len(messages),
        tool_results_cut=cut,
        estimated_tokens=fixed + sum(message_tokens(m) for m in messages),
        budget_tokens=budget_tokens,
    )


def _tokens(unit: Sequence[Message]) -> int:
    return sum(message_tokens(m) for m in unit)


def _units(history: Sequence[Message]) -> list[tuple[Message, ...]]:
    """The history in pieces that are kept or dropped whole: an assistant message with tool calls and the tool
    messages that follow it; every other message alone."""
    units: list[list[Message]] = []
    for message in history:
        calls_before = bool(units) and any(
            m.role is MessageRole.TOOL or any(isinstance(p, ToolUseContent) for p in m.content) for m in units[-1]
        )
        if message.role is MessageRole.TOOL and calls_before:
            units[-1].append(message)
        else:
            units.append([message])
    return [tuple(unit) for unit in units]


def _last_user_unit(units: Sequence[tuple[Message, ...]]) -> int | None:
    for index in range(len(units) - 1, -1, -1):
        if units[index][0].role is MessageRole.USER:
            return index
    return None


def _cut_results(unit: tuple[Message, ...], room: int, *, force: bool) -> tuple[tuple[Message, ...] | None, int]:
    """The unit with its tool results cut to fit `room` tokens, and how many were cut; None when the unit has no
    results, or too little room for them (unless `force`: then they are cut as short as it takes)."""
    results = [p for m in unit for p in m.content if isinstance(p, ToolResultContent)]
    if not results:
        return None, 0
    emptied = {id(p): replace(p, result=cut_marker(len(p.result))) for p in results}
    left = room - _tokens(_with_results(unit, emptied))
    if left < MIN_RESULT_TOKENS * len(results) and not force:
        return None, 0
    chars_left = max(left, 0) * CHARS_PER_TOKEN
    shortened: dict[int, ToolResultContent] = {}
    for position, part in enumerate(sorted(results, key=lambda p: len(p.result))):
        share = chars_left // (len(results) - position)  # the shorter results leave their unused share to longer ones
        if len(part.result) <= share + len(cut_marker(len(part.result))):
            shortened[id(part)] = part
            chars_left -= len(part.result) - len(cut_marker(len(part.result)))
        else:
            omitted = len(part.result) - share
            shortened[id(part)] = replace(part, result=part.result[:share] + cut_marker(omitted))
            chars_left -= share
    count = sum(1 for p in results if shortened[id(p)] is not p)
    return _with_results(unit, shortened), count


def _with_results(unit: tuple[Message, ...], results: dict[int, ToolResultContent]) -> tuple[Message, ...]:
    return tuple(
        replace(m, content=tuple(results.get(id(p), p) for p in m.content)) if m.role is MessageRole.TOOL else m
        for m in unit
    )
