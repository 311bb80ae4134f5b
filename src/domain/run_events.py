"""What happens in a run, as events a follower reads in order. Each event type has a typed payload."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Self

from domain.elicitation import Elicitation
from domain.ids import AgentId, MessageId, RunId, ThreadId
from domain.runs import PendingToolCall, Run, RunError, RunStatus


class RunEventType(StrEnum):
    CREATED = "run.created"
    IN_PROGRESS = "run.in_progress"
    MESSAGE_DELTA = "message.delta"
    TOOL_CALL_STARTED = "tool_call.started"
    TOOL_CALL_COMPLETED = "tool_call.completed"
    TOOL_CALL_PROGRESS = "tool_call.progress"
    TOOL_CALL_LOG = "tool_call.log"
    REQUIRES_ACTION = "run.requires_action"
    COMPLETED = "run.completed"
    FAILED = "run.failed"
    CANCELLED = "run.cancelled"
    CONTEXT_TRIMMED = "run.context_trimmed"

    @property
    def ends_stream(self) -> bool:
        """After this event the run does nothing until someone acts (or ever again)."""
        return self in _ENDS_STREAM


_ENDS_STREAM = frozenset(
    {RunEventType.REQUIRES_ACTION, RunEventType.COMPLETED, RunEventType.FAILED, RunEventType.CANCELLED}
)


@dataclass(frozen=True, kw_only=True)
class RunChanged:
    """The run as every `run.*` event shows it."""

    type: ClassVar[RunEventType]
    run_id: RunId
    thread_id: ThreadId
    agent_id: AgentId
    status: RunStatus

    @staticmethod
    def summary(run: Run) -> dict[str, Any]:
        return {"run_id": run.id, "thread_id": run.thread_id, "agent_id": run.agent_id, "status": run.status}

    @classmethod
    def of(cls, run: Run) -> Self:
        """The event for the run as it is now (for the events that say nothing more)."""
        return cls(**cls.summary(run))


@dataclass(frozen=True, kw_only=True)
class RunCreated(RunChanged):
    type = RunEventType.CREATED


@dataclass(frozen=True, kw_only=True)
class RunInProgress(RunChanged):
    type = RunEventType.IN_PROGRESS


@dataclass(frozen=True, kw_only=True)
class RunRequiresAction(RunChanged):
    type = RunEventType.REQUIRES_ACTION
    required_action: tuple[PendingToolCall, ...]
    questions: tuple[Elicitation, ...] = ()
    """What the servers of its MCP tool calls ask the user (elicitation)."""

    @classmethod
    def of(cls, run: Run) -> Self:
        return cls(**cls.summary(run), required_action=run.required_action, questions=run.open_questions)


@dataclass(frozen=True, kw_only=True)
class RunCompleted(RunChanged):
    type = RunEventType.COMPLETED
    answer: str
    """The text of the run's last answer."""


@dataclass(frozen=True, kw_only=True)
class RunFailed(RunChanged):
    type = RunEventType.FAILED
    error: RunError


@dataclass(frozen=True, kw_only=True)
class RunCancelled(RunChanged):
    type = RunEventType.CANCELLED


@dataclass(frozen=True, kw_only=True)
class MessageDelta:
    """Text of an assistant message as the model streams it (not stored: the message is)."""

    type: ClassVar[RunEventType] = RunEventType.MESSAGE_DELTA
    message_id: MessageId
    text: str


@dataclass(frozen=True, kw_only=True)
class ToolCallStarted:
    type: ClassVar[RunEventType] = RunEventType.TOOL_CALL_STARTED
    tool_call_id: str
    name: str
    tool_type: str
    """The kind of tool (`mcp_tool`, `client`, ...; `unknown` for a name the run does not offer)."""
    arguments: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class ToolCallCompleted:
    type: ClassVar[RunEventType] = RunEventType.TOOL_CALL_COMPLETED
    tool_call_id: str
    name: str
    is_error: bool
    result: str


@dataclass(frozen=True, kw_only=True)
class ToolCallProgress:
    """How far a tool call is, as the tool reports it (an MCP server's progress notifications); not stored: the
    call's result is."""

    type: ClassVar[RunEventType] = RunEventType.TOOL_CALL_PROGRESS
    tool_call_id: str
    progress: float
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True, kw_only=True)
class ToolCallLog:
    """A log message of a tool call, as the tool sends it (an MCP server's `notifications/message`); not stored."""

    type: ClassVar[RunEventType] = RunEventType.TOOL_CALL_LOG
    tool_call_id: str
    level: str
    """debug, info, notice, warning, error, critical, alert or emergency"""
    logger: str | None = None
    data: Any = None
    """What the server logged: text, or any JSON value"""


@dataclass(frozen=True, kw_only=True)
class ContextTrimmed:
    """A model call's request left out part of the thread to fit the model's context window."""

    type: ClassVar[RunEventType] = RunEventType.CONTEXT_TRIMMED
    step: int
    """The run's step whose model call it was."""
    messages_dropped: int
    """The thread's oldest messages the request left out."""
    tool_results_cut: int
    """Tool results the request sent shortened."""
    estimated_tokens: int
    budget_tokens: int
    """The request's estimated tokens, and the most it could take (the context window less room for the answer)."""
    messages_summarized: int = 0
    """Of the messages left out, how many the request holds a summary of."""


RunEventPayload = (
    RunCreated
    | RunInProgress
    | RunRequiresAction
    | RunCompleted
    | RunFailed
    | RunCancelled
    | MessageDelta
    | ToolCallStarted
    | ToolCallCompleted
    | ToolCallProgress
    | ToolCallLog
    | ContextTrimmed
)


def run_ended(run: Run, answer: str = "") -> RunCompleted | RunFailed | RunCancelled:
    """The event that announces how a run ended."""
    summary = RunChanged.summary(run)
    if run.status is RunStatus.COMPLETED:
        return RunCompleted(**summary, answer=answer)
    if run.status is RunStatus.CANCELLED:
        return RunCancelled(**summary)
    if run.status is RunStatus.FAILED and run.error is not None:
        return RunFailed(**summary, error=run.error)
    raise ValueError(f"a {run.status.value} run has not ended")


@dataclass(frozen=True, kw_only=True)
class RunEvent:
    run_id: RunId
    seq: int
    """1 for the run's first event, then counting up."""
    payload: RunEventPayload
    created_at: datetime

    @property
    def type(self) -> RunEventType:
        return self.payload.type
