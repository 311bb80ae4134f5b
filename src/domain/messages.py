"""Messages and their typed content parts."""

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.errors import InvalidValue
from domain.ids import MessageId, OrgId, RunId, ThreadId

TEXT_MAX = 1_000_000
PARTS_MAX = 256
IMAGE_URL_MAX = 4_096
IMAGE_DATA_MAX = 5 * 1024 * 1024
IMAGE_MIME_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


class MessageRole(StrEnum):
    """Who a message is from."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass(frozen=True, kw_only=True)
class TextContent:
    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InvalidValue("text content must be a string")
        if len(self.text) > TEXT_MAX:
            raise InvalidValue(f"text content must be at most {TEXT_MAX} characters")


@dataclass(frozen=True, kw_only=True)
class ToolUseContent:
    """The model asks for a tool call."""

    id: str
    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ToolResultContent:
    """The outcome of a tool call, as the model will read it."""

    tool_use_id: str
    tool_name: str
    result: str
    is_error: bool = False


@dataclass(frozen=True, kw_only=True)
class ImageContent:
    """An image given by URL, or inline as base64 data with its mime type."""

    url: str | None = None
    data: str | None = None
    mime_type: str | None = None

    def __post_init__(self) -> None:
        if (self.url is None) == (self.data is None):
            raise InvalidValue("an image needs exactly one of url or data")
        if self.url is not None and (not self.url.startswith(("https://", "http://")) or len(self.url) > IMAGE_URL_MAX):
            raise InvalidValue(f"image url must be an http(s) URL of at most {IMAGE_URL_MAX} characters")
        if self.data is not None:
            if self.mime_type not in IMAGE_MIME_TYPES:
                raise InvalidValue(f"inline image mime_type must be one of {', '.join(sorted(IMAGE_MIME_TYPES))}")
            if len(self.data) > IMAGE_DATA_MAX * 4 // 3 + 4:
                raise InvalidValue(f"inline image must be at most {IMAGE_DATA_MAX} bytes")
            try:
                base64.b64decode(self.data, validate=True)
            except (binascii.Error, ValueError):
                raise InvalidValue("inline image data must be base64") from None


ContentPart = TextContent | ToolUseContent | ToolResultContent | ImageContent

_ALLOWED_PARTS: dict[MessageRole, tuple[type, ...]] = {
    MessageRole.SYSTEM: (TextContent,),
    MessageRole.USER: (TextContent, ImageContent),
    MessageRole.ASSISTANT: (TextContent, ToolUseContent),
    MessageRole.TOOL: (ToolResultContent,),
}


@dataclass(frozen=True, kw_only=True)
class Message:
    id: MessageId
    org_id: OrgId
    thread_id: ThreadId
    role: MessageRole
    content: tuple[ContentPart, ...]
    position: int
    created_at: datetime
    run_id: RunId | None = None

    def __post_init__(self) -> None:
        if not self.content:
            raise InvalidValue("a message needs at least one content part")
        if len(self.content) > PARTS_MAX:
            raise InvalidValue(f"a message may hold at most {PARTS_MAX} content parts")
        allowed = _ALLOWED_PARTS[self.role]
        for part in self.content:
            if not isinstance(part, allowed):
                raise InvalidValue(f"a {self.role.value} message cannot hold {part_type(part)} content")

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.content if isinstance(p, TextContent))


def part_type(part: ContentPart) -> str:
    return {
        TextContent: "text",
        ToolUseContent: "tool_use",
        ToolResultContent: "tool_result",
        ImageContent: "image",
    }[type(part)]


def part_to_dict(part: ContentPart) -> dict[str, Any]:
    """The one JSON shape of a content part, used for storage and the API alike."""
    match part:
        case TextContent(text=text):
            return {"type": "text", "text": text}
        case ToolUseContent(id=id_, name=name, params=params):
            return {"type": "tool_use", "id": id_, "name": name, "params": dict(params)}
        case ToolResultContent(tool_use_id=tid, tool_name=name, result=result, is_error=is_error):
            return {
                "type": "tool_result",
                "tool_use_id": tid,
                "tool_name": name,
                "result": result,
                "is_error": is_error,
            }
        case ImageContent(url=url, data=data, mime_type=mime):
            out: dict[str, Any] = {"type": "image"}
            if url is not None:
                out["url"] = url
            if data is not None:
                out["data"] = data
            if mime is not None:
                out["mime_type"] = mime
            return out
    raise InvalidValue(f"unknown content part {part!r}")


def part_from_dict(data: Mapping[str, Any]) -> ContentPart:
    kind = data.get("type")
    try:
        match kind:
            case "text":
                return TextContent(text=data["text"])
            case "tool_use":
                return ToolUseContent(id=data["id"], name=data["name"], params=dict(data.get("params") or {}))
            case "tool_result":
                return ToolResultContent(
                    tool_use_id=data["tool_use_id"],
                    tool_name=data["tool_name"],
                    result=data["result"],
                    is_error=bool(data.get("is_error", False)),
                )
            case "image":
                return ImageContent(url=data.get("url"), data=data.get("data"), mime_type=data.get("mime_type"))
    except KeyError as missing:
        raise InvalidValue(f"{kind} content needs {missing.args[0]!r}") from None
    raise InvalidValue(f"unknown content type {kind!r}")


def content_from_dicts(parts: Sequence[Mapping[str, Any]]) -> tuple[ContentPart, ...]:
    return tuple(part_from_dict(p) for p in parts)
