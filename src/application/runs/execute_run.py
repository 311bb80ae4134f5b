"""ExecuteRun: the LLM <-> tools loop of one run."""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from application.errors import ModelError
from application.ports.execution import RunEventBus
from application.ports.llm import LanguageModel, ModelRequest, ModelResponse, ModelToolCall
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.ports.tracing import Level, RunTrace, Tracer
from application.runs.events import RunEventStream
from application.runs.start import new_thread, queue_run, run_summary
from application.runs.tools.assembly import AssembledTools, ToolAssembler
from application.runs.tools.handler import ToolContext, ToolOutcome, truncate
from domain.agents import Agent
from domain.ids import AgentId, MessageId, OrgId, RunId
from domain.messages import ContentPart, Message, MessageRole, TextContent, ToolResultContent, ToolUseContent
from domain.runs import (
    TERMINAL_EVENTS,
    PendingToolCall,
    Run,
    RunErrorCode,
    RunEvent,
    RunEventType,
    RunStatus,
    RunStep,
    StepToolCall,
)
from domain.tools import Tool, ToolType

logger = logging.getLogger(__name__)

INTERRUPTED = "threadline:interrupted"
"""The message a run's task is cancelled with when the server shuts down (not a user's cancel)."""
ToolHandler = Callable[[ModelToolCall, Tool, ToolContext], Awaitable[ToolOutcome]]
HISTORY_LIMIT = 10_000


@dataclass(frozen=True, kw_only=True)
class RunLimits:
    tool_result_max_chars: int = 20_000
    parallel_tool_calls: int = 8
    max_delegation_depth: int = 3


class ExecuteRun:
    """Runs the loop of a queued (or resumed) run until it completes, fails, is cancelled, or waits
    for the client's tool results. Transactions are short: none is open during a model or tool call."""

    def __init__(
        self,
        *,
        uow: UnitOfWork,
        clock: Clock,
        ids: IdGenerator,
        llm: LanguageModel,
        tracer: Tracer,
        bus: RunEventBus,
        assembler: ToolAssembler,
        handlers: Mapping[ToolType, ToolHandler],
        limits: RunLimits,
    ) -> None:
        self._uow, self._clock, self._ids = uow, clock, ids
        self._llm, self._tracer, self._bus = llm, tracer, bus
        self._assembler, self._handlers, self._limits = assembler, handlers, limits

    async def execute(self, org_id: OrgId, run_id: RunId, *, depth: int = 0) -> Run | None:
        begun = await self._begin(org_id, run_id)
        if begun is None:
            return None
        run, agent, events, history = begun
        trace = self._tracer.start_run(
            name="run",
            run_id=str(run.id),
            thread_id=str(run.thread_id),
            org_id=str(org_id),
            agent_id=str(agent.id),
            metadata={
                "agent": agent.slug,
                "model": agent.model,
                "parent_run_id": str(run.parent_run_id or ""),
            },
        )
        if run.trace_id is None:
            run.trace_id = trace.trace_id
        try:
            await self._loop(run, agent, events, trace, depth, history)
        except asyncio.CancelledError as cancelled:
            interrupted = INTERRUPTED in cancelled.args
            await self._settle_cancelled(run, events, interrupted=interrupted)
            trace.end(level=Level.WARNING, status_message="interrupted" if interrupted else "the run was cancelled")
            raise
        except Exception:
            logger.exception("run failed unexpectedly", extra={"run_id": str(run.id)})
            await self._finish(
                run, events, RunStatus.FAILED, RunErrorCode.INTERNAL_ERROR, "the run failed unexpectedly"
            )
            trace.end(level=Level.ERROR, status_message="the run failed unexpectedly")
            return run
        trace.end(
            output=run.status.value,
            level=Level.ERROR if run.status is RunStatus.FAILED else Level.DEFAULT,
            status_message=run.error.message if run.error else None,
        )
        return run

    # -- the loop ------------------------------------------------------------------------------

    async def _begin(self, org_id: OrgId, run_id: RunId) -> tuple[Run, Agent, RunEventStream, list[Message]] | None:
        async with self._uow as uow:
            run = await uow.runs.get(org_id, run_id, for_update=True)
            if run is None or run.status not in (RunStatus.QUEUED, RunStatus.IN_PROGRESS):
                return None
            events = await RunEventStream.resume(uow, org_id, run_id, self._bus, self._clock)
            now = self._clock.now()
            agent = await uow.agents.get(org_id, run.agent_id)
            recorded = []
            if run.cancel_requested:
                run.cancel(now)
                recorded.append(await events.record(uow, RunEventType.CANCELLED, run_summary(run)))
            elif agent is None:
                run.fail(RunErrorCode.AGENT_NOT_FOUND, "the run's agent was deleted", now)
                recorded.append(await events.record(uow, RunEventType.FAILED, self._failure(run)))
            elif run.status is RunStatus.QUEUED:
                run.start(now)
                recorded.append(await events.record(uow, RunEventType.IN_PROGRESS, run_summary(run)))
            await uow.runs.save(run)
            history = list(await uow.messages.list(org_id, run.thread_id, limit=HISTORY_LIMIT, after_position=None))
            await uow.commit()
        await events.publish(*recorded)
        if agent is None or run.status is not RunStatus.IN_PROGRESS:
            return None
        return run, agent, events, history

    async def _loop(
        self, run: Run, agent: Agent, events: RunEventStream, trace: RunTrace, depth: int, history: list[Message]
    ) -> None:
        """`history` is the thread as loaded at the start; the loop appends what it adds, so it is read once."""
        tools = await self._assembler.assemble(agent, run.client_tools)
        for warning in tools.warnings:
            run.warn(warning)
        context = ToolContext(
            org_id=run.org_id, run_id=run.id, thread_id=run.thread_id, agent=agent, trace=trace, depth=depth
        )
        while True:
            if run.step_count >= agent.max_steps:
                await self._finish(
                    run,
                    events,
                    RunStatus.FAILED,
                    RunErrorCode.MAX_STEPS_EXCEEDED,
                    f"the agent was still calling tools after {agent.max_steps} steps",
                )
                return
            message_id = MessageId(self._ids.new())
            started = self._clock.now()
            response = await self._call_model(run, agent, tools, history, events, trace, message_id)
            if response is None:
                return
            if not await self._record_answer(run, agent, tools, response, events, history, message_id, started):
                return
            if await self._call_tools(run, response.tool_calls, tools, context, events, history):
                return  # waiting for the client's tool results

    async def _call_model(
        self,
        run: Run,
        agent: Agent,
        tools: AssembledTools,
        history: Sequence[Message],
        events: RunEventStream,
        trace: RunTrace,
        message_id: MessageId,
    ) -> ModelResponse | None:
        generation = trace.generation(
            f"step {run.step_count + 1}",
            model=agent.model,
            model_parameters=agent.model_settings.as_dict(),
            input=[{"role": m.role.value, "content": m.text} for m in history[-20:]],
        )

        async def on_text(delta: str) -> None:
            await events.publish(
                events.make(RunEventType.MESSAGE_DELTA, {"message_id": str(message_id), "text": delta})
            )

        try:
            response = await self._llm.complete(
                ModelRequest(
                    model=agent.model,
                    instructions=agent.instructions,
                    messages=history,
                    tools=tools.definitions(),
                    settings=agent.model_settings,
                    parallel_tool_calls=agent.parallel_tool_calls,
                ),
                on_text=on_text,
            )
        except ModelError as error:
            generation.end(level=Level.ERROR, status_message=error.detail)
            await self._finish(run, events, RunStatus.FAILED, error.code, error.detail)
            return None
        generation.end(
            output={
                "text": response.text,
                "tool_calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in response.tool_calls],
            },
            usage=response.usage,
            model=response.model or agent.model,
        )
        return response

    async def _record_answer(
        self,
        run: Run,
        agent: Agent,
        tools: AssembledTools,
        response: ModelResponse,
        events: RunEventStream,
        history: list[Message],
        message_id: MessageId,
        started: datetime,
    ) -> bool:
        """Store the model's answer and the step in one transaction, with what follows from it: the run
        completes, is cancelled (someone asked meanwhile), or goes on to its tool calls. True: it goes on."""
        content: list[ContentPart] = (
            [TextContent(text=response.text)] if response.text or not response.tool_calls else []
        )
        content += [ToolUseContent(id=c.id, name=c.name, params=dict(c.arguments)) for c in response.tool_calls]
        step = RunStep(
            number=run.step_count + 1,
            model=response.model or agent.model,
            usage=response.usage,
            finish_reason=response.finish_reason,
            started_at=started,
            completed_at=self._clock.now(),
            tool_calls=tuple(
                StepToolCall(
                    id=c.id,
                    name=c.name,
                    type=self._type_of(tools, c.name),
                    pending=self._pauses(tools, c.name),
                )
                for c in response.tool_calls
            ),
        )
        recorded = []
        async with self._uow as uow:
            history.append(await self._append(uow, run, MessageRole.ASSISTANT, tuple(content), message_id))
            now = self._clock.now()
            run.record_step(step, now)
            if await uow.runs.cancel_requested(run.org_id, run.id):
                run.cancel(now)
                recorded.append(await events.record(uow, RunEventType.CANCELLED, run_summary(run)))
            elif not response.tool_calls:
                run.complete(now)
                recorded.append(
                    await events.record(uow, RunEventType.COMPLETED, run_summary(run) | {"answer": response.text})
                )
            else:
                for call in response.tool_calls:
                    recorded.append(
                        await events.record(
                            uow,
                            RunEventType.TOOL_CALL_STARTED,
                            {
                                "tool_call_id": call.id,
                                "name": call.name,
                                "type": self._type_of(tools, call.name),
                                "arguments": dict(call.arguments),
                            },
                        )
                    )
            await uow.runs.save(run)
            await uow.commit()
        await events.publish(*recorded)
        return run.status is RunStatus.IN_PROGRESS

    @staticmethod
    def _type_of(tools: AssembledTools, name: str) -> str:
        tool = tools.get(name)
        return tool.type.value if tool else "unknown"

    @staticmethod
    def _pauses(tools: AssembledTools, name: str) -> bool:
        tool = tools.get(name)
        return tool is not None and not tool.executable

    async def _append(
        self,
        uow: UnitOfWork,
        run: Run,
        role: MessageRole,
        content: tuple[ContentPart, ...],
        message_id: MessageId | None = None,
    ) -> Message:
        thread = await uow.threads.get(run.org_id, run.thread_id, for_update=True)
        if thread is None:
            raise RuntimeError("the run's thread was deleted")
        now = self._clock.now()
        message = Message(
            id=message_id or MessageId(self._ids.new()),
            org_id=run.org_id,
            thread_id=run.thread_id,
            run_id=run.id,
            role=role,
            content=content,
            position=thread.next_position(now),
            created_at=now,
        )
        await uow.threads.save(thread)
        await uow.messages.add(message)
        return message

    # -- tools ---------------------------------------------------------------------------------

    async def _call_tools(
        self,
        run: Run,
        calls: Sequence[ModelToolCall],
        tools: AssembledTools,
        context: ToolContext,
        events: RunEventStream,
        history: list[Message],
    ) -> bool:
        """Carry out the step's tool calls (in parallel when the agent allows), store their results in
        call order, and tell whether the run now waits for the client."""
        completed: list[RunEvent] = []

        async def one(call: ModelToolCall) -> ToolOutcome:
            outcome = await self._call_tool(call, tools, context)
            if outcome.pending is None:
                # Followers see it at once (the bus keeps it); it is stored with the step's results below.
                event = events.make(
                    RunEventType.TOOL_CALL_COMPLETED,
                    {"tool_call_id": call.id, "name": call.name, "is_error": outcome.is_error, "result": outcome.text},
                )
                completed.append(event)
                await events.publish(event)
            return outcome

        if context.agent.parallel_tool_calls and len(calls) > 1:
            gate = asyncio.Semaphore(self._limits.parallel_tool_calls)

            async def gated(call: ModelToolCall) -> ToolOutcome:
                async with gate:
                    return await one(call)

            outcomes = list(await asyncio.gather(*(gated(c) for c in calls)))
        else:
            outcomes = [await one(c) for c in calls]

        results = tuple(
            ToolResultContent(tool_use_id=c.id, tool_name=c.name, result=o.text, is_error=o.is_error)
            for c, o in zip(calls, outcomes, strict=True)
            if o.pending is None
        )
        pending = tuple(o.pending for o in outcomes if o.pending is not None)
        recorded = []
        async with self._uow as uow:
            for event in completed:
                await uow.run_events.add(event, run.org_id)
            if results:
                history.append(await self._append(uow, run, MessageRole.TOOL, results))
            now = self._clock.now()
            run.settle_tool_calls({r.tool_use_id for r in results if r.is_error}, now)
            if pending:
                run.require_action(pending, now)
                recorded.append(
                    await events.record(
                        uow,
                        RunEventType.REQUIRES_ACTION,
                        {**run_summary(run), "required_action": [_pending_json(p) for p in pending]},
                    )
                )
            await uow.runs.save(run)
            await uow.commit()
        await events.publish(*recorded)
        return bool(pending)

    async def _call_tool(self, call: ModelToolCall, tools: AssembledTools, context: ToolContext) -> ToolOutcome:
        tool = tools.get(call.name)
        if tool is None:
            available = ", ".join(tools.names) or "none"
            return ToolOutcome(text=f"Tool '{call.name}' does not exist. Available tools: {available}", is_error=True)
        if call.arguments_error is not None:
            return ToolOutcome(text=f"Invalid arguments for tool '{call.name}': {call.arguments_error}", is_error=True)
        if not tool.executable:
            span = context.trace.span(
                "client_tool",
                input=dict(call.arguments),
                metadata={"toolName": tool.name, "toolType": tool.type.value},
            )
            span.end(output="waiting for the client's result")
            pending = PendingToolCall(id=call.id, name=call.name, arguments=dict(call.arguments), type=tool.type.value)
            return ToolOutcome(text="", pending=pending)
        if tool.type is ToolType.AGENT:
            outcome = await self._delegate(call, tool, context)
        else:
            handler = self._handlers.get(tool.type)
            if handler is None:
                return ToolOutcome(text=f"Tool '{call.name}' cannot be used on this server", is_error=True)
            outcome = await handler(call, tool, context)
        limit = self._limits.tool_result_max_chars
        return ToolOutcome(text=truncate(outcome.text, limit), is_error=outcome.is_error, data=outcome.data)

    async def _delegate(self, call: ModelToolCall, tool: Tool, context: ToolContext) -> ToolOutcome:
        """A sub-agent answers the task in a thread of its own, as a run of its own."""
        task = str(call.arguments.get("input") or "").strip()
        if not task:
            return ToolOutcome(text="Delegation failed: input parameter is required", is_error=True)
        if context.depth >= self._limits.max_delegation_depth:
            return ToolOutcome(text="Delegation failed: agents may delegate only so deep", is_error=True)
        span = context.trace.span("sub_agent", input={"input": task}, metadata={"agentId": tool.metadata["agent_id"]})
        async with self._uow as uow:
            sub_agent = await uow.agents.get(context.org_id, AgentId(UUID(str(tool.metadata["agent_id"]))))
            if sub_agent is None:
                span.end(level=Level.ERROR, status_message="the agent no longer exists")
                return ToolOutcome(text="Delegation failed: the agent no longer exists", is_error=True)
            thread = await new_thread(
                uow,
                clock=self._clock,
                ids=self._ids,
                agent=sub_agent,
                title=f"Delegated by {context.agent.name}",
            )
            child, created = await queue_run(
                uow,
                clock=self._clock,
                ids=self._ids,
                thread=thread,
                agent=sub_agent,
                input=task,
                parent_run_id=context.run_id,
            )
            await uow.commit()
        await self._bus.publish(created)
        finished = await self.execute(context.org_id, child.id, depth=context.depth + 1)
        if finished is not None and finished.status is RunStatus.REQUIRES_ACTION:
            await self.cancel_waiting(finished)
        if finished is None or finished.status is not RunStatus.COMPLETED:
            reason = finished.error.message if finished and finished.error else "it needs tools that the client runs"
            span.end(level=Level.ERROR, status_message=reason, metadata={"childRunId": str(child.id)})
            return ToolOutcome(text=f"Delegation failed: {reason}", is_error=True)
        answer = await self.final_answer(finished)
        span.end(output=answer, metadata={"childRunId": str(child.id)})
        return ToolOutcome(text=answer, data={"run_id": str(child.id)})

    async def final_answer(self, run: Run) -> str:
        """The text of the run's last assistant message."""
        async with self._uow.read_only() as uow:
            messages = await uow.messages.list(run.org_id, run.thread_id, limit=HISTORY_LIMIT, after_position=None)
        answers = [m.text for m in messages if m.run_id == run.id and m.role is MessageRole.ASSISTANT and m.text]
        return answers[-1] if answers else ""

    async def cancel_waiting(self, run: Run) -> None:
        """Cancel a run that waits for client tools no one will run (a delegated or published run)."""
        async with self._uow as uow:
            events = await RunEventStream.resume(uow, run.org_id, run.id, self._bus, self._clock)
            stored = await uow.runs.get(run.org_id, run.id, for_update=True)
            if stored is None or stored.status is not RunStatus.REQUIRES_ACTION:
                return
            stored.cancel(self._clock.now())
            event = await events.record(uow, RunEventType.CANCELLED, run_summary(stored))
            await uow.runs.save(stored)
            await uow.commit()
        await events.publish(event)

    # -- endings -------------------------------------------------------------------------------

    async def _finish(
        self,
        run: Run,
        events: RunEventStream,
        status: RunStatus,
        code: str | None = None,
        message: str | None = None,
        answer: str | None = None,
    ) -> None:
        async with self._uow as uow:
            now = self._clock.now()
            if status is RunStatus.COMPLETED:
                run.complete(now)
            elif status is RunStatus.CANCELLED:
                run.cancel(now)
            else:
                run.fail(code or RunErrorCode.INTERNAL_ERROR, message or "the run failed", now)
            data: dict[str, Any] = run_summary(run)
            if answer is not None:
                data["answer"] = answer
            if run.error is not None:
                data["error"] = {"code": run.error.code, "message": run.error.message}
            event = await events.record(uow, TERMINAL_EVENTS[status], data)
            await uow.runs.save(run)
            await uow.commit()
        await events.publish(event)

    @staticmethod
    def _failure(run: Run) -> dict[str, Any]:
        data: dict[str, Any] = run_summary(run)
        if run.error is not None:
            data["error"] = {"code": run.error.code, "message": run.error.message}
        return data

    async def _settle_cancelled(self, run: Run, events: RunEventStream, *, interrupted: bool) -> None:
        """Record the cancellation (or the interruption, at shutdown), though this task is being cancelled."""
        if run.status.is_terminal:
            return
        if interrupted:
            ending = self._finish(
                run,
                events,
                RunStatus.FAILED,
                RunErrorCode.INTERRUPTED,
                "the server stopped while the run was executing",
            )
        else:
            ending = self._finish(run, events, RunStatus.CANCELLED)
        try:
            await asyncio.shield(ending)
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.exception("could not record a run's cancellation", extra={"run_id": str(run.id)})


def _pending_json(call: PendingToolCall) -> dict[str, Any]:
    return {"tool_call_id": call.id, "name": call.name, "type": call.type, "arguments": dict(call.arguments)}
