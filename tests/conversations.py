"""Building conversations (domain messages) for language model tests."""

import itertools
from datetime import UTC, datetime
from uuid import uuid4

from domain.ids import MessageId, OrgId, ThreadId
from domain.messages import ContentPart, Message, MessageRole, TextContent, ToolResultContent

_ORG = OrgId(uuid4())
_THREAD = ThreadId(uuid4())
_NOW = datetime(2026, 1, 1, tzinfo=UTC)
_positions = itertools.count(1)


def message(role: MessageRole, *parts: ContentPart | str) -> Message:
    """A message of one thread; plain strings become text parts."""
    return Message(
        id=MessageId(uuid4()),
        org_id=_ORG,
        thread_id=_THREAD,
        role=role,
        content=tuple(TextContent(text=p) if isinstance(p, str) else p for p in parts),
        position=next(_positions),
        created_at=_NOW,
    )


def user(*parts: ContentPart | str) -> Message:
    return message(MessageRole.USER, *parts)


def assistant(*parts: ContentPart | str) -> Message:
    return message(MessageRole.ASSISTANT, *parts)


def tool_results(*results: ToolResultContent) -> Message:
    return message(MessageRole.TOOL, *results)
