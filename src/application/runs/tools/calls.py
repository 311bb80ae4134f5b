"""Carrying out the tool calls of one step: each by its handler, in parallel when the agent allows."""

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from application.ports.llm import ModelToolCall
from application.ports.mcp import McpAnswer, McpQuestion
from application.runs.questions import LiveQuestions
from application.runs.step import RunState
from application.runs.tools.handler import ToolContext, ToolHandler, ToolOutcome, truncate
from domain.run_events import RunEvent, ToolCallCompleted, ToolCallLog, ToolCallProgress
from domain.runs import PendingToolCall
from domain.tools import Tool, ToolType

PROGRESS_BURST = 20
PROGRESS_PER_SECOND = 10.0
"""How many progress reports of one tool call its run's followers are told at once, and then per second; the
ones in between are superseded by the next (the last one before the call ends is told, and a report that the
work is done always is)."""
LOGS_PER_CALL = 200
"""How many log messages of one tool call its run's followers are told (the rest are dropped)."""
LOG_DATA_MAX = 4_000
"""Logged data longer than this (as JSON) is told as its text, cut."""


def _bounded(data: Any) -> Any:
    text = json.dumps(data, ensure_ascii=False, default=str)
    if len(text) <= LOG_DATA_MAX:
        return data
    return text[:LOG_DATA_MAX] + "…"


@dataclass(frozen=True, kw_only=True)
class ToolLimits:
    result_max_chars: int = 20_000
    """Longer results are shortened before the model reads them."""
    parallel_calls: int = 8
    """How many calls of one step run at once."""


@dataclass(frozen=True, kw_only=True)
class StepResults:
    outcomes: list[ToolOutcome]
    """One per call, in call order."""
    completed: list[RunEvent]
    """The tool_call.completed events already published (followers saw them at once), to be stored."""


class ToolCalls:
    def __init__(
        self, handlers: Mapping[ToolType, ToolHandler], limits: ToolLimits, questions: LiveQuestions | None = None
    ) -> None:
        self._handlers, self._limits, self._questions = handlers, limits, questions

    async def __call__(
        self, state: RunState, calls: Sequence[ModelToolCall], *, after: "asyncio.Future[None] | None" = None
    ) -> StepResults:
        """`after`: the calls begin while the step asking for them is being stored (they only read); what they
        tell the run's followers (progress, logs, results) and the questions they ask wait until it is, and are
        never told if it does not go on (`after` cancelled: the calls are being cancelled)."""
        completed: list[RunEvent] = []
        context = state.tool_context

        async def going_on() -> bool:
            """Whether the step asking for the calls is stored and the run goes on (what they tell is numbered
            after the step's events, and told after them). The hooks that ask this may run in a task of the MCP
            client's session, which other calls share: they must not raise a cancellation into it."""
            if after is None:
                return True
            await asyncio.wait((after,))
            return not after.cancelled()

        async def one(call: ModelToolCall) -> ToolOutcome:
            reports = _ProgressReports()

            async def progress(value: float, total: float | None, message: str | None) -> None:
                payload = ToolCallProgress(tool_call_id=call.id, progress=value, total=total, message=message)
                if reports.tells(payload) and await going_on():
                    await state.events.publish(state.events.make(payload))

            logged = 0

            async def log(level: str, logger: str | None, data: Any) -> None:
                nonlocal logged
                logged += 1
                if logged > LOGS_PER_CALL:
                    return  # a chatty tool: its result still comes
                payload = ToolCallLog(tool_call_id=call.id, level=level, logger=logger, data=_bounded(data))
                if await going_on():
                    await state.events.publish(state.events.make(payload))

            ask = None
            if self._questions is not None and state.live_questions:
                questions = self._questions

                async def ask(question: McpQuestion) -> McpAnswer:
                    if not await going_on():  # (asking stores the question) the run stops: nobody will answer
                        return McpAnswer(action="cancel")
                    return await questions.ask(state, call.id, call.name, question)

            answered = tuple(q for q in state.run.answered_questions if q.tool_call_id == call.id)
            hooks = replace(context, progress=progress, log=log, answered=answered, ask=ask)
            outcome = await self._call(call, state, hooks)
            if not await going_on():
                raise asyncio.CancelledError  # (this task is being cancelled: its step stopped the run)
            if (superseded := reports.untold()) is not None:  # how far the call got, before it ends
                await state.events.publish(state.events.make(superseded))
            if not outcome.waits:
                payload = ToolCallCompleted(
                    tool_call_id=call.id, name=call.name, is_error=outcome.is_error, result=outcome.text
                )
                event = state.events.make(payload)
                completed.append(event)
                await state.events.publish(event)
            return outcome

        if state.agent.parallel_tool_calls and len(calls) > 1:
            gate = asyncio.Semaphore(self._limits.parallel_calls)

            async def gated(call: ModelToolCall) -> ToolOutcome:
                async with gate:
                    return await one(call)

            outcomes = list(await asyncio.gather(*(gated(c) for c in calls)))
        else:
            outcomes = [await one(c) for c in calls]
        return StepResults(outcomes=outcomes, completed=completed)

    async def _call(self, call: ModelToolCall, state: RunState, context: ToolContext) -> ToolOutcome:
        tool = state.tools.get(call.name)
        if tool is None:
            available = ", ".join(state.tools.names) or "none"
            return ToolOutcome(text=f"Tool '{call.name}' does not exist. Available tools: {available}", is_error=True)
        if call.arguments_error is not None:
            return ToolOutcome(text=f"Invalid arguments for tool '{call.name}': {call.arguments_error}", is_error=True)
        if not tool.executable:
            return _wait_for_client(call, tool, context)
        handler = self._handlers.get(tool.type)
        if handler is None:
            return ToolOutcome(text=f"Tool '{call.name}' cannot be used on this server", is_error=True)
        outcome = await handler(call, tool, context)
        if outcome.questions:
            return outcome
        limit = self._limits.result_max_chars
        return ToolOutcome(text=truncate(outcome.text, limit), is_error=outcome.is_error, data=outcome.data)


def _wait_for_client(call: ModelToolCall, tool: Tool, context: ToolContext) -> ToolOutcome:
    """A tool the API client carries out: the run will wait for its result."""
    span = context.trace.span(
        "client_tool", input=dict(call.arguments), metadata={"toolName": tool.name, "toolType": tool.type.value}
    )
    span.end(output="waiting for the client's result")
    pending = PendingToolCall(id=call.id, name=call.name, arguments=dict(call.arguments), type=tool.type.value)
    return ToolOutcome(text="", pending=pending)


class _ProgressReports:
    """Which progress reports of one call are told: a burst, then a few per second (a token bucket); a report
    held back is kept until the next one supersedes it or the call ends."""

    def __init__(self) -> None:
        self._tokens = float(PROGRESS_BURST)
        self._at: float | None = None
        self._held: ToolCallProgress | None = None

    def tells(self, report: ToolCallProgress) -> bool:
        now = asyncio.get_running_loop().time()
        if self._at is not None:
            self._tokens = min(float(PROGRESS_BURST), self._tokens + (now - self._at) * PROGRESS_PER_SECOND)
        self._at = now
        done = report.total is not None and report.progress >= report.total
        if self._tokens >= 1 or done:
            self._tokens = max(0.0, self._tokens - 1)
            self._held = None
            return True
        self._held = report
        return False

    def untold(self) -> ToolCallProgress | None:
        """The last report held back, if no later one was told."""
        held, self._held = self._held, None
        return held
