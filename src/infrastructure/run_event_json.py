"""The JSON shape of each run event's payload: stored in run_events.data and sent as the `data` of an SSE frame.
The README documents it, event by event."""

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from domain.elicitation import Elicitation
from domain.ids import AgentId, MessageId, RunId, ThreadId
from domain.run_events import (
    ContextTrimmed,
    MessageDelta,
    RunCancelled,
    RunChanged,
    RunCompleted,
    RunCreated,
    RunEventPayload,
    RunEventType,
    RunFailed,
    RunInProgress,
    RunRequiresAction,
    ToolCallCompleted,
    ToolCallLog,
    ToolCallProgress,
    ToolCallStarted,
)
from domain.runs import PendingToolCall, RunError, RunStatus


def event_data(payload: RunEventPayload) -> dict[str, Any]:
    match payload:
        case RunCompleted(answer=answer):
            return _run(payload) | {"answer": answer}
        case RunFailed(error=error):
            return _run(payload) | {"error": {"code": error.code, "message": error.message}}
        case RunRequiresAction(required_action=calls, questions=questions):
            return _run(payload) | {
                "required_action": [_pending(c) for c in calls],
                "elicitations": [elicitation_json(q) for q in questions],
            }
        case RunChanged():
            return _run(payload)
        case MessageDelta(message_id=message_id, text=text):
            return {"message_id": str(message_id), "text": text}
        case ToolCallStarted():
            return {
                "tool_call_id": payload.tool_call_id,
                "name": payload.name,
                "type": payload.tool_type,
                "arguments": dict(payload.arguments),
            }
        case ToolCallProgress():
            return {
                "tool_call_id": payload.tool_call_id,
                "progress": payload.progress,
                "total": payload.total,
                "message": payload.message,
            }
        case ToolCallLog():
            return {
                "tool_call_id": payload.tool_call_id,
                "level": payload.level,
                "logger": payload.logger,
                "data": payload.data,
            }
        case ToolCallCompleted():
            return {
                "tool_call_id": payload.tool_call_id,
                "name": payload.name,
                "is_error": payload.is_error,
                "result": payload.result,
            }
        case ContextTrimmed():
            return {
                "step": payload.step,
                "messages_dropped": payload.messages_dropped,
                "tool_results_cut": payload.tool_results_cut,
                "estimated_tokens": payload.estimated_tokens,
                "budget_tokens": payload.budget_tokens,
                "messages_summarized": payload.messages_summarized,
            }


def _run(payload: RunChanged) -> dict[str, Any]:
    return {
        "run_id": str(payload.run_id),
        "thread_id": str(payload.thread_id),
        "agent_id": str(payload.agent_id),
        "status": payload.status.value,
    }


def _pending(call: PendingToolCall) -> dict[str, Any]:
    return {"tool_call_id": call.id, "name": call.name, "type": call.type, "arguments": dict(call.arguments)}


def elicitation_json(question: Elicitation) -> dict[str, Any]:
    """A question as clients see it (the server's request state stays with the run)."""
    return {
        "id": question.id,
        "type": "elicitation",
        "tool_call_id": question.tool_call_id,
        "tool_name": question.tool_name,
        "message": question.message,
        "requested_schema": dict(question.requested_schema),
    }


_RUN_CHANGES: Mapping[RunEventType, type[RunCreated | RunInProgress | RunCancelled]] = {
    RunEventType.CREATED: RunCreated,
    RunEventType.IN_PROGRESS: RunInProgress,
    RunEventType.CANCELLED: RunCancelled,
}


def event_payload(event_type: RunEventType, data: Mapping[str, Any]) -> RunEventPayload:
    """The payload stored as `data` for an event of `event_type` (the inverse of event_data)."""
    match event_type:
        case RunEventType.MESSAGE_DELTA:
            return MessageDelta(message_id=MessageId(UUID(data["message_id"])), text=data["text"])
        case RunEventType.TOOL_CALL_STARTED:
            return ToolCallStarted(
                tool_call_id=data["tool_call_id"],
                name=data["name"],
                tool_type=data["type"],
                arguments=data["arguments"],
            )
        case RunEventType.TOOL_CALL_PROGRESS:
            return ToolCallProgress(
                tool_call_id=data["tool_call_id"],
                progress=data["progress"],
                total=data.get("total"),
                message=data.get("message"),
            )
        case RunEventType.TOOL_CALL_LOG:
            return ToolCallLog(
                tool_call_id=data["tool_call_id"], level=data["level"], logger=data.get("logger"), data=data.get("data")
            )
        case RunEventType.TOOL_CALL_COMPLETED:
            return ToolCallCompleted(
                tool_call_id=data["tool_call_id"], name=data["name"], is_error=data["is_error"], result=data["result"]
            )
        case RunEventType.CONTEXT_TRIMMED:
            return ContextTrimmed(
                step=data["step"],
                messages_dropped=data["messages_dropped"],
                tool_results_cut=data["tool_results_cut"],
                estimated_tokens=data["estimated_tokens"],
                budget_tokens=data["budget_tokens"],
                messages_summarized=data.get("messages_summarized", 0),
            )
    run: dict[str, Any] = {
        "run_id": RunId(UUID(data["run_id"])),
        "thread_id": ThreadId(UUID(data["thread_id"])),
        "agent_id": AgentId(UUID(data["agent_id"])),
        "status": RunStatus(data["status"]),
    }
    match event_type:
        case RunEventType.COMPLETED:
            return RunCompleted(**run, answer=data["answer"])
        case RunEventType.FAILED:
            return RunFailed(**run, error=RunError(code=data["error"]["code"], message=data["error"]["message"]))
        case RunEventType.REQUIRES_ACTION:
            calls = tuple(
                PendingToolCall(id=c["tool_call_id"], name=c["name"], type=c["type"], arguments=c["arguments"])
                for c in data["required_action"]
            )
            questions = tuple(
                Elicitation(
                    id=q["id"],
                    tool_call_id=q["tool_call_id"],
                    tool_name=q["tool_name"],
                    key=q["id"].removeprefix(f"{q['tool_call_id']}:"),
                    message=q["message"],
                    requested_schema=q["requested_schema"],
                )
                for q in data.get("elicitations", ())
            )
            return RunRequiresAction(**run, required_action=calls, questions=questions)
    return _RUN_CHANGES[event_type](**run)
