from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from domain.errors import InvalidValue
from domain.ids import AgentId, OrgId, ThreadId
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

    def next_position(self, now: datetime) -> int:
        """Reserve the position of the next message appended to this thread."""
        self.message_count += 1
        self.updated_at = now
        return self.message_count
