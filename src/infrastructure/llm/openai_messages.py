"""Translation of the domain conversation and tools into Chat Completions request fields."""

import json
from collections.abc import Sequence
from typing import Any

from application.ports.llm import ToolDefinition
from domain.messages import (
    ImageContent,
    Message,
    MessageRole,
    TextContent,
    ToolResultContent,
    ToolUseContent,
)


def chat_messages(instructions: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The `messages` of a Chat Completions request: the instructions as a system message, then the
    conversation. A tool message holding several results becomes one `tool` message per result."""
    out: list[dict[str, Any]] = []
    if instructions.strip():
        out.append({"role": "system", "content": instructions})
    for message in messages:
        out.extend(_chat_messages_of(message))
    return out


def chat_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": dict(tool.parameters),
            },
        }
        for tool in tools
    ]


def _chat_messages_of(message: Message) -> list[dict[str, Any]]:
    match message.role:
        case MessageRole.SYSTEM:
            return [{"role": "system", "content": message.text}]
        case MessageRole.USER:
            return [{"role": "user", "content": _user_content(message)}]
        case MessageRole.ASSISTANT:
            return [_assistant_message(message)]
        case MessageRole.TOOL:
            return [
                {"role": "tool", "tool_call_id": part.tool_use_id, "content": part.result}
                for part in message.content
                if isinstance(part, ToolResultContent)
            ]
    raise ValueError(f"unknown message role {message.role!r}")


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    if all(isinstance(part, TextContent) for part in message.content):
        return message.text
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextContent):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ImageContent):
            parts.append({"type": "image_url", "image_url": {"url": _image_url(part)}})
    return parts


def _image_url(image: ImageContent) -> str:
    if image.url is not None:
        return image.url
    return f"data:{image.mime_type};base64,{image.data}"


def _assistant_message(message: Message) -> dict[str, Any]:
    texts = [part.text for part in message.content if isinstance(part, TextContent)]
    calls = [part for part in message.content if isinstance(part, ToolUseContent)]
    out: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": json.dumps(dict(call.params), ensure_ascii=False),
                },
            }
            for call in calls
        ]
    return out
