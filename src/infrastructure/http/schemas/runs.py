import json
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import AliasChoices, Field, StrictBool, StringConstraints, field_validator

from application.caller import Caller
from application.runs.create_run import INPUT_MAX, CreateRunCommand
from application.runs.submit_tool_results import SubmitToolResultsCommand, ToolResultInput
from domain.ids import AgentId, RunId, ThreadId
from domain.run_events import RunEvent
from domain.runs import IDEMPOTENCY_KEY_MAX, ClientTool, PendingToolCall, RunStatus
from infrastructure.http.schemas.common import RequestModel, ResponseModel
from infrastructure.run_event_json import event_data

ToolName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")]


class ClientToolIn(RequestModel):
    name: ToolName
    description: Annotated[str, StringConstraints(max_length=4_000, strict=True)] = ""
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the arguments",
    )


class RunCreate(RequestModel):
    agent_id: UUID | None = Field(default=None, description="The agent that answers; the thread's agent if absent")
    input: Annotated[str, StringConstraints(min_length=1, max_length=INPUT_MAX, strict=True)] | None = Field(
        default=None, description="Appended to the thread as a user message first"
    )
    tools: list[ClientToolIn] = Field(default_factory=list, max_length=64, description="Tools your client executes")
    stream: StrictBool = Field(default=False, description="Answer with a Server-Sent Events stream of run events")
    idempotency_key: Annotated[str, StringConstraints(min_length=1, max_length=IDEMPOTENCY_KEY_MAX)] | None = None

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
    tool_use_id: Annotated[str, StringConstraints(min_length=1, max_length=200, strict=True)]
    result: Annotated[str, StringConstraints(max_length=1_000_000, strict=True)]
    is_error: StrictBool = False


class ToolResultsIn(RequestModel):
    tool_results: list[ToolResultIn] = Field(min_length=1, max_length=64)
    stream: StrictBool = False

    def to_command(self, caller: Caller, run_id: UUID) -> SubmitToolResultsCommand:
        return SubmitToolResultsCommand(
            caller=caller,
            run_id=RunId(run_id),
            results=tuple(
                ToolResultInput(tool_use_id=r.tool_use_id, result=r.result, is_error=r.is_error)
                for r in self.tool_results
            ),
        )


class UsageOut(ResponseModel):
    input_tokens: int
    output_tokens: int
    total_tokens: int


CallId = Annotated[
    str,
    Field(
        validation_alias=AliasChoices("tool_call_id", "id"),
        description="The call's id, as run events name it; answer it as `tool_use_id` in /tool-results",
    ),
]


class StepToolCallOut(ResponseModel):
    tool_call_id: CallId
    name: str
    type: str
    is_error: bool
    pending: bool


class StepOut(ResponseModel):
    number: int
    model: str
    usage: UsageOut
    finish_reason: str | None
    started_at: datetime
    completed_at: datetime
    tool_calls: list[StepToolCallOut]


class PendingCallOut(ResponseModel):
    tool_call_id: CallId
    name: str
    type: str
    arguments: dict[str, Any]


class RequiredActionOut(ResponseModel):
    type: str = "submit_tool_results"
    tool_calls: list[PendingCallOut]


class RunErrorOut(ResponseModel):
    code: str
    message: str


class ClientToolOut(ResponseModel):
    name: str
    description: str
    parameters: dict[str, Any] = Field(description="JSON Schema of the arguments")


class RunOut(ResponseModel):
    id: UUID
    thread_id: UUID
    agent_id: UUID
    parent_run_id: UUID | None
    status: RunStatus
    required_action: RequiredActionOut | None = Field(description="The client tool calls the run waits for")
    steps: list[StepOut]
    usage: UsageOut
    error: RunErrorOut | None
    warnings: list[str]
    trace_id: str | None
    idempotency_key: str | None
    client_tools: list[ClientToolOut]
    cancel_requested: bool
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    ended_at: datetime | None

    @field_validator("required_action", mode="before")
    @classmethod
    def _pending_calls(cls, pending: tuple[PendingToolCall, ...] | dict[str, Any] | None) -> object:
        if isinstance(pending, tuple):
            return {"tool_calls": pending} if pending else None
        return pending


def sse_frame(event: RunEvent) -> str:
    frame = {
        "type": event.type.value,
        "run_id": str(event.run_id),
        "seq": event.seq,
        "created_at": event.created_at.isoformat(),
        "data": event_data(event.payload),
    }
    return f"id: {event.seq}\nevent: {event.type.value}\ndata: {json.dumps(frame, default=str)}\n\n"
