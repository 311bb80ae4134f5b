import json
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import BaseModel, Field, StrictBool, StringConstraints

from application.caller import Caller
from application.runs.create_run import INPUT_MAX, CreateRunCommand
from application.runs.submit_tool_results import SubmitToolResultsCommand, ToolResultInput
from domain.ids import AgentId, RunId, ThreadId
from domain.run_events import RunEvent
from domain.runs import IDEMPOTENCY_KEY_MAX, ClientTool, Run, RunStatus
from infrastructure.http.schemas.common import RequestModel
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


class UsageOut(BaseModel):
    input_tokens: int
    output_tokens: int
    total_tokens: int


class StepToolCallOut(BaseModel):
    id: str
    name: str
    type: str
    is_error: bool
    pending: bool


class StepOut(BaseModel):
    number: int
    model: str
    usage: UsageOut
    finish_reason: str | None
    started_at: datetime
    completed_at: datetime
    tool_calls: list[StepToolCallOut]


class PendingCallOut(BaseModel):
    id: str
    name: str
    type: str
    arguments: dict[str, Any]


class RequiredActionOut(BaseModel):
    type: str = "submit_tool_results"
    tool_calls: list[PendingCallOut]


class RunErrorOut(BaseModel):
    code: str
    message: str


class RunOut(BaseModel):
    id: UUID
    thread_id: UUID
    agent_id: UUID
    parent_run_id: UUID | None
    status: RunStatus
    required_action: RequiredActionOut | None
    steps: list[StepOut]
    usage: UsageOut
    error: RunErrorOut | None
    warnings: list[str]
    trace_id: str | None
    idempotency_key: str | None
    client_tools: list[ClientToolIn]
    cancel_requested: bool
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    ended_at: datetime | None

    @classmethod
    def of(cls, run: Run) -> "RunOut":
        def usage(u: Any) -> UsageOut:
            return UsageOut(input_tokens=u.input_tokens, output_tokens=u.output_tokens, total_tokens=u.total_tokens)

        return cls(
            id=run.id,
            thread_id=run.thread_id,
            agent_id=run.agent_id,
            parent_run_id=run.parent_run_id,
            status=run.status,
            required_action=RequiredActionOut(
                tool_calls=[
                    PendingCallOut(id=c.id, name=c.name, type=c.type, arguments=dict(c.arguments))
                    for c in run.required_action
                ]
            )
            if run.required_action
            else None,
            steps=[
                StepOut(
                    number=s.number,
                    model=s.model,
                    usage=usage(s.usage),
                    finish_reason=s.finish_reason,
                    started_at=s.started_at,
                    completed_at=s.completed_at,
                    tool_calls=[StepToolCallOut(**c.__dict__) for c in s.tool_calls],
                )
                for s in run.steps
            ],
            usage=usage(run.usage),
            error=RunErrorOut(code=run.error.code, message=run.error.message) if run.error else None,
            warnings=list(run.warnings),
            trace_id=run.trace_id,
            idempotency_key=run.idempotency_key,
            client_tools=[
                ClientToolIn(name=t.name, description=t.description, parameters=dict(t.parameters))
                for t in run.client_tools
            ],
            cancel_requested=run.cancel_requested,
            created_at=run.created_at,
            updated_at=run.updated_at,
            started_at=run.started_at,
            ended_at=run.ended_at,
        )


def sse_frame(event: RunEvent) -> str:
    frame = {
        "type": event.type.value,
        "run_id": str(event.run_id),
        "seq": event.seq,
        "created_at": event.created_at.isoformat(),
        "data": event_data(event.payload),
    }
    return f"id: {event.seq}\nevent: {event.type.value}\ndata: {json.dumps(frame, default=str)}\n\n"
