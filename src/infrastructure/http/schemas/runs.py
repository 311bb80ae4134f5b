import json
from datetime import datetime
from typing import Annotated, Any, Protocol, Self, runtime_checkable
from uuid import UUID

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    ValidationInfo,
    model_validator,
)

from application.caller import Caller
from application.runs.answer_questions import AnswerQuestionsCommand, QuestionAnswer
from application.runs.create_run import INPUT_MAX, CreateRunCommand
from application.runs.submit_tool_results import SubmitToolResultsCommand, ToolResultInput
from domain.elicitation import ElicitationAction
from domain.ids import AgentId, RunId, ThreadId
from domain.run_events import RunEvent
from domain.runs import IDEMPOTENCY_KEY_MAX, ClientTool, Run, RunStatus
from infrastructure.http.schemas.common import RequestModel, ResponseModel
from infrastructure.run_event_json import elicitation_json, event_data

ToolName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")]


class ClientToolIn(RequestModel):
    """A tool your client executes: the run pauses in requires_action when the model calls it."""

    name: ToolName
    """The function name the model sees"""
    description: Annotated[str, StringConstraints(max_length=4_000, strict=True)] = ""
    """What the tool does, as the model reads it"""
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the arguments",
    )


class RunCreate(RequestModel):
    """A run of an agent on the thread."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"input": "What do my sources say about refunds?"}]})

    agent_id: UUID | None = Field(default=None, description="The agent that answers; the thread's agent if absent")
    input: Annotated[str, StringConstraints(min_length=1, max_length=INPUT_MAX, strict=True)] | None = Field(
        default=None, description="Appended to the thread as a user message first"
    )
    tools: list[ClientToolIn] = Field(default_factory=list, max_length=64, description="Tools your client executes")
    stream: StrictBool = Field(default=False, description="Answer with a Server-Sent Events stream of run events")
    idempotency_key: Annotated[str, StringConstraints(min_length=1, max_length=IDEMPOTENCY_KEY_MAX)] | None = None
    """The same key returns the same run (200) instead of starting another"""

    def to_command(self, caller: Caller, thread_id: UUID) -> CreateRunCommand:
        return CreateRunCommand(
            caller=caller,
            thread_id=ThreadId(thread_id),
            agent_id=AgentId(self.agent_id) if self.agent_id else None,
            input=self.input,
            client_tools=tuple(
                ClientTool(name=t.name, description=t.description, parameters=t.parameters) for t in self.tools
            ),
            idempotency_key=self.idempotency_key,
        )


class ToolResultIn(RequestModel):
    """The result of one client tool call."""

    tool_use_id: Annotated[str, StringConstraints(min_length=1, max_length=200, strict=True)]
    """The call's `tool_call_id`"""
    result: Annotated[str, StringConstraints(max_length=1_000_000, strict=True)]
    """The result, as the model will read it"""
    is_error: StrictBool = False
    """Whether the tool failed"""


class ToolResultsIn(RequestModel):
    """Results of the client tool calls a run waits for."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"tool_results": [{"tool_use_id": "call_1", "result": "42"}]}]}
    )

    tool_results: list[ToolResultIn] = Field(min_length=1, max_length=64)
    """One result per call"""
    stream: StrictBool = False
    """Answer with a Server-Sent Events stream of the run's further events"""

    def to_command(self, caller: Caller, run_id: UUID) -> SubmitToolResultsCommand:
        return SubmitToolResultsCommand(
            caller=caller,
            run_id=RunId(run_id),
            results=tuple(
                ToolResultInput(tool_use_id=r.tool_use_id, result=r.result, is_error=r.is_error)
                for r in self.tool_results
            ),
        )


class AnswerIn(RequestModel):
    """The user's answer to one question."""

    elicitation_id: Annotated[str, StringConstraints(min_length=1, max_length=400, strict=True)]
    """The question's `id`"""
    action: ElicitationAction
    """`accept` (with `content`), `decline` (the user refuses) or `cancel` (the user dismissed the question)"""
    content: dict[str, Any] | None = None
    """The values, by property of the question's `requested_schema`: with `accept` only"""


class AnswersIn(RequestModel):
    """Answers to the questions a run waits for: all of them at once."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"answers": [{"elicitation_id": "call_1:confirm", "action": "accept", "content": {"guests": 4}}]}
            ]
        }
    )

    answers: list[AnswerIn] = Field(min_length=1, max_length=64)
    """One answer per question"""
    stream: StrictBool = False
    """Answer with a Server-Sent Events stream of the run's further events"""

    def to_command(self, caller: Caller, run_id: UUID) -> AnswerQuestionsCommand:
        return AnswerQuestionsCommand(
            caller=caller,
            run_id=RunId(run_id),
            answers=tuple(
                QuestionAnswer(question_id=a.elicitation_id, action=a.action, content=a.content) for a in self.answers
            ),
        )


@runtime_checkable
class TraceLinks(Protocol):
    def trace_url(self, trace_id: str) -> str | None: ...


class UsageOut(ResponseModel):
    """Tokens used by model calls."""

    input_tokens: int
    """Tokens sent to the model"""
    output_tokens: int
    """Tokens the model wrote"""
    total_tokens: int
    """Both added up"""
    cached_tokens: int
    """Of the input tokens, those the provider read from its prompt cache (when it says)"""


CallId = Annotated[
    str,
    Field(
        validation_alias=AliasChoices("tool_call_id", "id"),
        description="The call's id, as run events name it; answer it as `tool_use_id` in /tool-results",
    ),
]


class StepToolCallOut(ResponseModel):
    """A tool call the model made in a step."""

    tool_call_id: CallId
    """The call's id"""
    name: str
    """The tool's name"""
    type: str
    """The tool's kind: a native type, `mcp_tool`, `agent`, `client`..."""
    is_error: bool
    """Whether the call failed"""
    pending: bool
    """Whether its result is still awaited (a client tool)"""


class StepContextOut(ResponseModel):
    """How a step's request was fitted into the model's context window."""

    messages_sent: int
    """Messages of the thread the request held"""
    messages_dropped: int
    """The thread's oldest messages it left out"""
    tool_results_cut: int
    """Tool results it sent shortened (each says so at its end)"""
    estimated_tokens: int
    """The request's estimated tokens: instructions, tool definitions and messages"""
    budget_tokens: int
    """The most a request could take: the model's context window less the room kept for the answer"""
    messages_summarized: int
    """Of the messages left out, how many it held a summary of (the agent's `summarize_history`)"""


class StepOut(ResponseModel):
    """One model call of a run, and the tool calls it asked for."""

    number: int
    """1 for the first model call, then counting up"""
    model: str
    """The model that answered"""
    usage: UsageOut
    """Tokens of this call"""
    finish_reason: str | None
    """Why the model stopped (`stop`, `tool_calls`, `length`...)"""
    started_at: datetime
    """When the call began"""
    completed_at: datetime
    """When the model answered"""
    tool_calls: list[StepToolCallOut]
    """The tool calls it asked for"""
    context: StepContextOut | None = None
    """How its request was fitted into the model's context window (what it left out)"""


class PendingCallOut(ResponseModel):
    """A client tool call the run waits for."""

    tool_call_id: CallId
    """Send its result with this id"""
    name: str
    """The tool's name"""
    type: str
    """The tool's kind (`client`, or a displayable native tool)"""
    arguments: dict[str, Any]
    """The arguments the model sent"""


class ElicitationOut(ResponseModel):
    """A question the server of one of the run's MCP tool calls asks the user (elicitation)."""

    id: str
    """Answer it with this id (`POST /v1/runs/{run_id}/answers`)"""
    type: str = "elicitation"
    """Always `elicitation`"""
    tool_call_id: str
    """The tool call that asks (as run events name it)"""
    tool_name: str
    """The tool, as the model named it"""
    message: str
    """The question, as the server put it"""
    requested_schema: dict[str, Any] = Field(
        description="The form of the answer: a JSON Schema object of flat properties (strings, numbers, booleans, "
        "enums, lists of enum strings)"
    )


class RequiredActionOut(ResponseModel):
    """What the run waits for from the client: its client tool calls' results, the user's answers, or both."""

    type: str = "submit_tool_results"
    """`submit_tool_results` when client tool calls wait (maybe questions too), `elicitation` when only
    questions do"""
    tool_calls: list[PendingCallOut]
    """The calls to send results for (`POST /v1/runs/{run_id}/tool-results`)"""
    elicitations: list[ElicitationOut] = Field(default_factory=list)
    """The questions to answer (`POST /v1/runs/{run_id}/answers`)"""


def _required_action(run: Run) -> dict[str, Any] | None:
    questions = [elicitation_json(q) for q in run.open_questions]
    if not run.required_action and not questions:
        return None
    return {
        "type": "submit_tool_results" if run.required_action else "elicitation",
        "tool_calls": run.required_action,
        "elicitations": questions,
    }


class RunErrorOut(ResponseModel):
    """Why a run failed."""

    code: str
    """A stable code: model_unavailable, max_steps_exceeded, interrupted..."""
    message: str
    """What happened"""


class ClientToolOut(ResponseModel):
    """A tool the client executes, as given when the run was created."""

    name: str
    """The function name the model sees"""
    description: str
    """What the tool does"""
    parameters: dict[str, Any] = Field(description="JSON Schema of the arguments")


class RunOut(ResponseModel):
    """A run: one execution of an agent on a thread."""

    id: UUID
    """The run's id"""
    thread_id: UUID
    """Its thread"""
    agent_id: UUID
    """The agent that answers"""
    parent_run_id: UUID | None
    """The run that handed work to this one (sub-agents)"""
    status: RunStatus
    """Where it is: queued, in_progress, requires_action, completed, failed, cancelled, expired"""
    required_action: RequiredActionOut | None = Field(
        description="What the run waits for: client tool calls' results, answers to questions; null unless "
        "requires_action"
    )
    steps: list[StepOut]
    """Its model calls, in order"""
    usage: UsageOut
    """Tokens of all its model calls"""
    error: RunErrorOut | None
    """Why it failed; null unless failed"""
    warnings: list[str]
    """What went wrong without failing the run (an integration skipped...)"""
    trace_id: str | None
    """Its trace in Langfuse, when traced"""
    trace_url: str | None = Field(
        default=None,
        description="The run's trace in Langfuse's web app; null when tracing is not configured or there is no trace",
    )
    idempotency_key: str | None
    """The key it was created with"""
    request_id: str | None = None
    """The X-Request-Id of the request that created it (on its log lines and in its trace)"""
    client_tools: list[ClientToolOut]
    """Tools the client executes"""
    cancel_requested: bool
    """Whether a cancel was asked for"""
    created_at: datetime
    """When it was created"""
    updated_at: datetime
    """When it last changed"""
    started_at: datetime | None
    """When it began executing"""
    ended_at: datetime | None
    """When it ended"""

    @model_validator(mode="after")
    def _trace_link(self, info: ValidationInfo) -> Self:
        # The tracer is passed as the validation context: it knows where its backend shows a trace.
        tracer = info.context
        if self.trace_id and isinstance(tracer, TraceLinks):
            self.trace_url = tracer.trace_url(self.trace_id)
        return self

    @model_validator(mode="before")
    @classmethod
    def _from_run(cls, data: Any) -> Any:
        if isinstance(data, Run):
            values = {name: getattr(data, name) for name in cls.model_fields if hasattr(data, name)}
            return values | {"required_action": _required_action(data)}
        return data


def sse_frame(event: RunEvent) -> str:
    frame = {
        "type": event.type.value,
        "run_id": str(event.run_id),
        "seq": event.seq,
        "created_at": event.created_at.isoformat(),
        "data": event_data(event.payload),
    }
    return f"id: {event.seq}\nevent: {event.type.value}\ndata: {json.dumps(frame, default=str)}\n\n"
