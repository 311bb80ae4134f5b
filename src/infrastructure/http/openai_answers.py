"""A run's answer in the OpenAI wire formats: Chat Completions (an object, or `chat.completion.chunk` events)
and Responses (an object, or its streaming events), from the run's events as a follower reads them.

The agent's own tool calls (MCP, native, sub-agents) happen inside the run and are not shown; the calls the
run waits for (the client's tools) are the answer's `tool_calls` / `function_call` items."""

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from application.errors import (
    ModelError,
    ModelNotConfigured,
    ModelRequestRejected,
    ModelUnavailable,
    RunCancelledBeforeAnswering,
    RunModelFailed,
    RunModelNotConfigured,
    RunNotCompleted,
    RunWaitsForAnswers,
)
from domain.ids import MessageId
from domain.run_events import (
    MessageDelta,
    RunCancelled,
    RunCompleted,
    RunEvent,
    RunFailed,
    RunRequiresAction,
)
from domain.runs import PendingToolCall, Run
from domain.usage import Usage
from infrastructure.http.errors import status_of
from infrastructure.http.openai_errors import openai_error_body

Events = AsyncIterator[RunEvent | None]
"""A follower's events: None is a heartbeat (silence for a while)."""
KEEP_ALIVE = ": keep-alive\n\n"
STOPPED = "the server is stopping; the run goes on: follow it at /v1/runs/{run_id}/events"
_FAILED_AS: dict[str, type[RunNotCompleted]] = {
    ModelNotConfigured.code: RunModelNotConfigured,
    ModelError.code: RunModelFailed,
    ModelUnavailable.code: RunModelFailed,
    ModelRequestRejected.code: RunModelFailed,
}
"""The run errors that are not this server's fault: the agent's model has no provider here, or the provider failed
(the error table gives each its status). Any other failure is RunNotCompleted."""


@dataclass(frozen=True, kw_only=True)
class Exchange:
    """What an answer is about: the run, the model name the client used, and where this answer begins."""

    run: Run
    model: str
    after_seq: int = 0
    usage_before: Usage = field(default_factory=Usage)

    @property
    def suffix(self) -> str:
        """Identifies this answer of the run: a resumed run answers again, under another id."""
        return self.run.id.hex + (f"_{self.after_seq}" if self.after_seq else "")

    @property
    def created(self) -> int:
        return int(self.run.created_at.timestamp())

    def usage(self, run: Run) -> Usage:
        before = self.usage_before
        return Usage(
            input_tokens=run.usage.input_tokens - before.input_tokens,
            output_tokens=run.usage.output_tokens - before.output_tokens,
        )


@dataclass
class Outcome:
    """How the run answered: its text (the deltas streamed, else the completed answer) and how it ended."""

    texts: dict[MessageId, str] = field(default_factory=dict)
    ended: RunCompleted | RunRequiresAction | RunFailed | RunCancelled | None = None

    def add(self, delta: MessageDelta) -> str:
        """The text to show for this delta: a new message of the run starts on a new paragraph."""
        shown = delta.text
        if delta.message_id not in self.texts and any(self.texts.values()):
            shown = "\n\n" + shown
        self.texts[delta.message_id] = self.texts.get(delta.message_id, "") + delta.text
        return shown

    @property
    def streamed(self) -> str:
        return "\n\n".join(t for t in self.texts.values() if t)

    @property
    def text(self) -> str:
        """The answer: a completed run's last message, else what the run said before it waited."""
        return self.ended.answer if isinstance(self.ended, RunCompleted) else self.streamed

    def raise_unless_answered(self, run: Run) -> None:
        match self.ended:
            case RunFailed(error=error):
                raise _FAILED_AS.get(error.code, RunNotCompleted)(f"the run failed: {error.message}", error.code)
            case RunCancelled():
                raise RunCancelledBeforeAnswering("the run was cancelled before it answered")
            case RunRequiresAction(required_action=(), questions=questions) if questions:
                raise RunWaitsForAnswers(
                    "the run waits for the user's answers to questions of its tools' servers, which this API cannot "
                    f"carry: answer them with POST /v1/runs/{run.id}/answers"
                )
            case None:
                raise RunNotCompleted(STOPPED.format(run_id=run.id), "server_stopping")


async def outcome_of(events: Events) -> Outcome:
    outcome = Outcome()
    async for event in events:
        if event is None:
            continue
        payload = event.payload
        if isinstance(payload, MessageDelta):
            outcome.add(payload)
        elif isinstance(payload, RunCompleted | RunRequiresAction | RunFailed | RunCancelled):
            outcome.ended = payload
    return outcome


def _arguments(call: PendingToolCall) -> str:
    return json.dumps(dict(call.arguments), ensure_ascii=False)


def _calls(outcome: Outcome) -> tuple[PendingToolCall, ...]:
    return outcome.ended.required_action if isinstance(outcome.ended, RunRequiresAction) else ()


# -- Chat Completions ---------------------------------------------------------------------------------------


def chat_usage(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }


def _chat_tool_calls(calls: tuple[PendingToolCall, ...], *, indexed: bool) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _arguments(c)}}
        | ({"index": i} if indexed else {})
        for i, c in enumerate(calls)
    ]


def chat_completion(exchange: Exchange, outcome: Outcome, run: Run) -> dict[str, Any]:
    """The `chat.completion` object of a run that completed or waits for the client's tools."""
    outcome.raise_unless_answered(run)
    calls = _calls(outcome)
    message: dict[str, Any] = {"role": "assistant", "content": outcome.text or None, "refusal": None}
    if calls:
        message["tool_calls"] = _chat_tool_calls(calls, indexed=False)
    return {
        "id": f"chatcmpl-{exchange.suffix}",
        "object": "chat.completion",
        "created": exchange.created,
        "model": exchange.model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop", "logprobs": None}
        ],
        "usage": chat_usage(exchange.usage(run)),
    }


async def chat_chunks(
    exchange: Exchange, events: Events, final_run: Callable[[], Awaitable[Run]], *, include_usage: bool
) -> AsyncIterator[str]:
    """The run's answer as `chat.completion.chunk` server-sent events, then `[DONE]`; a run that fails or is
    cancelled ends with an error event, as OpenAI's streams do."""

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        body: dict[str, Any] = {
            "id": f"chatcmpl-{exchange.suffix}",
            "object": "chat.completion.chunk",
            "created": exchange.created,
            "model": exchange.model,
            "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if include_usage:
            body["usage"] = None
        return f"data: {json.dumps(body | extra, ensure_ascii=False)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    outcome = Outcome()
    async for event in events:
        if event is None:
            yield KEEP_ALIVE
            continue
        payload = event.payload
        if isinstance(payload, MessageDelta):
            yield chunk({"content": outcome.add(payload)})
        elif isinstance(payload, RunRequiresAction):
            outcome.ended = payload
            if payload.required_action:
                yield chunk({"tool_calls": _chat_tool_calls(payload.required_action, indexed=True)})
                yield chunk({}, "tool_calls")
        elif isinstance(payload, RunCompleted):
            outcome.ended = payload
            if not outcome.streamed and payload.answer:  # a replay: the deltas are gone, the answer is kept
                yield chunk({"content": payload.answer})
            yield chunk({}, "stop")
        elif isinstance(payload, RunFailed | RunCancelled):
            outcome.ended = payload
    try:
        outcome.raise_unless_answered(exchange.run)
    except RunNotCompleted as error:
        failure = openai_error_body(status_of(error), error.detail, error.code)  # as the answer would have been
        yield f"data: {json.dumps(failure, ensure_ascii=False)}\n\n"
        yield "data: [DONE]\n\n"
        return
    if include_usage:
        yield chunk(None, usage=chat_usage(exchange.usage(await final_run())))
    yield "data: [DONE]\n\n"


# -- Responses ----------------------------------------------------------------------------------------------


def response_id(exchange: Exchange) -> str:
    return f"resp_{exchange.suffix}"


def run_id_of_response(response: str) -> str:
    """The run id a response id names (resp_<run hex>[_<seq>]); the text given when it names none."""
    return response.removeprefix("resp_").partition("_")[0]


def responses_usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
    }


@dataclass(frozen=True, kw_only=True)
class ResponseRequest:
    """What the client asked for, as the response object repeats it."""

    instructions: str | None
    previous_response_id: str | None
    store: bool
    tools: list[dict[str, Any]]


def _message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = (
        [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if status == "completed" else []
    )
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


def _function_item(call: PendingToolCall) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call.id}",
        "call_id": call.id,
        "name": call.name,
        "arguments": _arguments(call),
        "status": "completed",
    }


def response_object(
    exchange: Exchange,
    request: ResponseRequest,
    *,
    status: str,
    output: list[dict[str, Any]],
    usage: Usage | None = None,
    error: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "id": response_id(exchange),
        "object": "response",
        "created_at": exchange.created,
        "status": status,
        "error": error,
        "incomplete_details": None,
        "instructions": request.instructions,
        "model": exchange.model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": request.previous_response_id,
        "store": request.store,
        "temperature": None,
        "top_p": None,
        "tool_choice": "auto",
        "tools": request.tools,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "metadata": {},
        "usage": responses_usage(usage) if usage is not None else None,
    }


def _ending(outcome: Outcome, run: Run) -> tuple[str, dict[str, str] | None]:
    match outcome.ended:
        case RunFailed(error=error):
            return "failed", {"code": error.code, "message": error.message}
        case RunCancelled():
            return "cancelled", None
        case RunRequiresAction(required_action=(), questions=questions) if questions:
            message = (
                "the run waits for the user's answers to questions of its tools' servers, which this API cannot "
                f"carry: answer them with POST /v1/runs/{run.id}/answers"
            )
            return "incomplete", {"code": "requires_answers", "message": message}
        case None:
            return "failed", {"code": "server_stopping", "message": STOPPED.format(run_id=run.id)}
    return "completed", None


def finished_response(exchange: Exchange, request: ResponseRequest, outcome: Outcome, run: Run) -> dict[str, Any]:
    """The response object of a run that ended or waits for the client's tools."""
    status, error = _ending(outcome, run)
    output = [_message_item(f"msg_{exchange.suffix}", outcome.text)] if outcome.text else []
    output += [_function_item(c) for c in _calls(outcome)]
    return response_object(exchange, request, status=status, output=output, usage=exchange.usage(run), error=error)


async def response_events(
    exchange: Exchange, request: ResponseRequest, events: Events, final_run: Callable[[], Awaitable[Run]]
) -> AsyncIterator[str]:
    """The Responses streaming events: response.created, response.in_progress, the output items as they come
    (response.output_item.added, response.content_part.added, response.output_text.delta ... .done), then
    response.completed (or response.failed)."""
    sequence = 0

    def event(kind: str, **data: Any) -> str:
        nonlocal sequence
        sequence += 1
        body = {"type": kind, "sequence_number": sequence} | data
        return f"event: {kind}\ndata: {json.dumps(body, ensure_ascii=False)}\n\n"

    started = response_object(exchange, request, status="in_progress", output=[])
    yield event("response.created", response=started)
    yield event("response.in_progress", response=started)
    outcome = Outcome()
    output: list[dict[str, Any]] = []
    message_id = f"msg_{exchange.suffix}"
    writing = False

    def open_message() -> list[str]:
        nonlocal writing
        writing = True
        index = len(output)
        return [
            event("response.output_item.added", output_index=index, item=_message_item(message_id, "", "in_progress")),
            event(
                "response.content_part.added",
                item_id=message_id,
                output_index=index,
                content_index=0,
                part={"type": "output_text", "text": "", "annotations": []},
            ),
        ]

    def close_message(text: str) -> list[str]:
        nonlocal writing
        writing = False
        index, item = len(output), _message_item(message_id, text)
        output.append(item)
        part = item["content"][0]
        return [
            event("response.output_text.done", item_id=message_id, output_index=index, content_index=0, text=text),
            event("response.content_part.done", item_id=message_id, output_index=index, content_index=0, part=part),
            event("response.output_item.done", output_index=index, item=item),
        ]

    async for run_event in events:
        if run_event is None:
            yield KEEP_ALIVE
            continue
        payload = run_event.payload
        if isinstance(payload, MessageDelta):
            for opened in [] if writing else open_message():
                yield opened
            delta = outcome.add(payload)
            yield event(
                "response.output_text.delta",
                item_id=message_id,
                output_index=len(output),
                content_index=0,
                delta=delta,
                logprobs=[],
            )
        elif isinstance(payload, RunCompleted | RunRequiresAction | RunFailed | RunCancelled):
            outcome.ended = payload
    if outcome.text and not writing and isinstance(outcome.ended, RunCompleted):
        for opened in open_message():  # a replay: the deltas are gone, the answer is kept
            yield opened
        yield event(
            "response.output_text.delta",
            item_id=message_id,
            output_index=len(output),
            content_index=0,
            delta=outcome.text,
            logprobs=[],
        )
    if writing:
        for closed in close_message(outcome.streamed or outcome.text):
            yield closed
    for call in _calls(outcome):
        index, item = len(output), _function_item(call)
        output.append(item)
        yield event("response.output_item.added", output_index=index, item=item | {"status": "in_progress"})
        yield event(
            "response.function_call_arguments.done", item_id=item["id"], output_index=index, arguments=item["arguments"]
        )
        yield event("response.output_item.done", output_index=index, item=item)
    run = await final_run()
    status, error = _ending(outcome, run)
    final = response_object(exchange, request, status=status, output=output, usage=exchange.usage(run), error=error)
    yield event("response.completed" if status == "completed" else "response.failed", response=final)
