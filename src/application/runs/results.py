"""What a tool call returns to the loop, and how long results are shortened."""

from dataclasses import dataclass, field
from typing import Any

from domain.runs import PendingToolCall


@dataclass(frozen=True, kw_only=True)
class ToolOutcome:
    text: str
    is_error: bool = False
    pending: PendingToolCall | None = None
    """Set when the call is carried out by the API client: the run pauses for its result."""
    data: dict[str, Any] = field(default_factory=dict)


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n…[truncated: {len(text) - limit} more characters]"
