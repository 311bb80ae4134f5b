from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from domain.errors import InvalidValue
from domain.ids import AgentId, MessageId, OrgId, RunId, ThreadId
from domain.messages import ContentPart, Message, MessageRole
from domain.text import require_text

THREAD_TITLE_MAX = 500
METADATA_KEYS_MAX = 16
METADATA_KEY_MAX = 64
METADATA_VALUE_MAX = 512


def check_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    if len(metadata) > METADATA_KEYS_MAX:
        raise InvalidValue(f"metadata may hold at most {METADATA_KEYS_MAX} keys")
    for key, value in metadata.items():
        if not isinstance(key, str) or not (1 <= len(key) <= METADATA_KEY_MAX):
            raise InvalidValue(f"metadata keys must be 1-{METADATA_KEY_MAX} characters")
        if not isinstance(value, str) or len(value) > METADATA_VALUE_MAX:
            raise InvalidValue(f"metadata values must be strings of at most {METADATA_VALUE_MAX} characters")
    return dict(metadata)


@dataclass(kw_only=True)
class Thread:
    """A conversation. Messages are numbered in the order they were appended."""

    id: ThreadId
    org_id: OrgId
    created_at: datetime
    updated_at: datetime
    agent_id: AgentId | None = None
    title: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    message_count: int = 0

    def __post_init__(self) -> None:
        require_text("title", self.title, max_length=THREAD_TITLE_MAX, allow_empty=True)
        self.metadata = check_metadata(self.metadata)

    def append(
        self,
        role: MessageRole,
        content: tuple[ContentPart, ...],
        *,
        message_id: MessageId,
        now: datetime,
        run_id: RunId | None = None,
    ) -> Message:
        """A new message at the end of the thread: numbered after the last one, of this thread and organization.
        The caller stores it with the thread (the thread's message count and time change with it)."""
        message = message_after(
            self.message_count,
            org_id=self.org_id,
            thread_id=self.id,
            role=role,
            content=content,
            message_id=message_id,
            now=now,
            run_id=run_id,
        )
        self.message_count = message.position
        self.updated_at = now
        return message


def message_after(
    count: int,
    *,
    org_id: OrgId,
    thread_id: ThreadId,
    role: MessageRole,
    content: tuple[ContentPart, ...],
    message_id: MessageId,
    now: datetime,
    run_id: RunId | None = None,
) -> Message:
    """The message that follows a thread's first `count` messages (Thread.append, or a run that counts its thread's
    messages itself while it is the thread's only writer)."""
    return Message(
        id=message_id,
        org_id=org_id,
        thread_id=thread_id,
        run_id=run_id,
        role=role,
        content=content,
        position=count + 1,
        created_at=now,
    )
