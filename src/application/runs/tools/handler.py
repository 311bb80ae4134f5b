"""What a tool call knows about its run, what it returns to the loop, and how long results are shortened."""

from dataclasses import dataclass, field
from typing import Any, Protocol

from application.ports.llm import ModelToolCall
from application.ports.mcp import QuestionAsker, ToolLog, ToolProgress
from application.ports.tracing import RunTrace
from domain.agents import Agent
from domain.elicitation import Elicitation
from domain.ids import OrgId, RunId, ThreadId
from domain.runs import PendingToolCall
from domain.tools import Tool


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What a tool call knows about the run it belongs to."""

    org_id: OrgId
    run_id: RunId
    thread_id: ThreadId
    agent: Agent
    trace: RunTrace
    depth: int = 0
    progress: ToolProgress | None = None
    """Tells the run's followers how far this tool call is (set per call)."""
    log: ToolLog | None = None
    """Tells the run's followers what the tool logs during this call (set per call)."""
    answered: tuple[Elicitation, ...] = ()
    """The questions the call's server asked, with the user's answers: the call is carried on with them."""
    ask: QuestionAsker | None = None
    """Asks the user a question the call's server sends while the call is open (the run waits for the answer)."""


@dataclass(frozen=True, kw_only=True)
class ToolOutcome:
    text: str
    is_error: bool = False
    pending: PendingToolCall | None = None
    """Set when the call is carried out by the API client: the run pauses for its result."""
    data: dict[str, Any] = field(default_factory=dict)
    questions: tuple[Elicitation, ...] = ()
    """Set when the tool's server asks the user first: the run pauses for the answers."""

    @property
    def waits(self) -> bool:
        """Whether the run waits for the client before this call has a result."""
        return self.pending is not None or bool(self.questions)


class ToolHandler(Protocol):
    """Carries out the calls of one tool type. A failure is an outcome with `is_error` (the model reads
    it and decides what to do), never an exception."""

    async def __call__(self, call: ModelToolCall, tool: Tool, context: ToolContext, /) -> ToolOutcome: ...


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n…[truncated: {len(text) - limit} more characters]"
