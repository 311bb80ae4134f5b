"""What a run stores as it goes: one short transaction per step, its events published after commit.

After each write, the durable state of a run is:
- `begin`: the run is in_progress with a run.in_progress event (or it ended: cancelled before it started,
  or its agent was deleted). A run this process executes as soon as it is created is stored so by the
  transaction that creates it (`begin_new`), and its execution starts from what that transaction read.
- `record_answer`: the model's answer is the thread's last message (text and tool calls) and the step is
  on the run; then either the run ended (completed, or cancelled when a cancel was asked meanwhile) or each
  tool call has a tool_call.started event. Tool calls that only read (their servers say so) begin as this
  is being stored, not after (ExecuteRun): a process that stops before it is stored leaves the run as it was
  before the model call, which is made again (and may ask for those calls again).
- `record_tool_results`: the step's tool results are the thread's last message, in call order, each with a
  tool_call.completed event; the run is in_progress (its next step calls the model) or requires_action
  (it waits for the results of the client's tools). When the run goes on, they are stored beside its next model
  call, which reads them from memory (`RunState.storing`): the model call has no effects, and every later write
  of the run waits for them first (`caught_up`), so its next step is never stored before them, and a run whose
  results could not be stored goes no further than a model call whose answer is dropped (a process that stops
  in the millisecond before they are stored leaves the run as stopped during its tool calls, below).
- `fail` / `cancel`: the run ended, with its terminal event.
- `fail_as_stored`: the same, for the run as the database has it (after a write that failed, the run in
  memory may be ahead of it).
So an in_progress run whose thread ends with an answer that has tool calls was stopped while those calls
were in flight: `begin` fails it as worker_lost (the calls may have had effects), unless each of them only reads
and was not made again already (Run.calls_may_be_made_again: they are made again, `Began.calls_again`); any other
in_progress run goes on with a model call (a worker that takes over a run another one lost resumes it there). A
resumed run announces run.in_progress again, its events numbered past any its previous holder published without
storing them (see RunEventStream).

`begin` claims the run (its lease is bumped), and every later write stores the run first, on the condition
that its lease is still the one claimed: a process whose run was taken over meanwhile gets LeaseLost and
writes nothing of that step (no message, no event).
"""

import asyncio
import logging
from collections.abc import Callable, Sequence
from copy import copy
from dataclasses import dataclass
from datetime import datetime

from application.errors import CancelRequested, LeaseLost, RunNotFound
from application.ports.execution import RunEventBus
from application.ports.llm import ModelToolCall
from application.ports.persistence import HistorySummary, UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.runs.events import RunEventStream, RunNotCreated, end_claimed, store_lost_end
from application.runs.model_call import ModelAnswer
from application.runs.step import RunState, StepOutcome
from application.runs.tools.calls import StepResults
from domain.agents import Agent
from domain.ids import MessageId, OrgId, RunId
from domain.messages import ContentPart, Message, MessageRole, TextContent, ToolResultContent, ToolUseContent
from domain.run_events import (
    ContextTrimmed,
    RunEvent,
    RunEventPayload,
    RunInProgress,
    RunRequiresAction,
    ToolCallStarted,
    run_ended,
)
from domain.runs import Run, RunErrorCode, RunStatus, RunStep, StepContext, StepToolCall
from domain.threads import message_after

logger = logging.getLogger(__name__)

HISTORY_LIMIT = 10_000
"""The most messages of its thread a run reads."""
WORKER_LOST = "the process executing the run stopped while its tool calls were in flight; they are not run again"
SUB_AGENT_LOST = "the process executing the run stopped, and with it the run that delegated to this one"
NOT_STARTED = "the run could not start: an unexpected error stopped it (the server's log says which)"


def _calls_in_flight(history: Sequence[Message]) -> bool:
    """Whether the thread ends with tool calls of the model whose results were never stored."""
    last = history[-1] if history else None
    return (
        last is not None
        and last.role is MessageRole.ASSISTANT
        and any(isinstance(part, ToolUseContent) for part in last.content)
    )


@dataclass(frozen=True, kw_only=True)
class Began:
    run: Run
    agent: Agent
    history: list[Message]
    thread_messages: int
    """The count of its thread's messages (see RunState)."""
    events: RunEventStream
    summary: HistorySummary | None = None
    """The thread's summary of its oldest messages, read when the agent summarizes what requests leave out"""
    calls_again: bool = False
    """The thread ends with the tool calls of the run's last step, in flight when its previous holder stopped, and
    each only reads: they are made again before the model is called (their results were never stored)."""
    created: "asyncio.Future[None] | None" = None
    """For a run that executes before the transaction creating it has committed (begin_new's `creation`): done
    once it has, failed with RunNotCreated if it did not. The execution's first write and first published event
    wait for it; its first model call does not."""


async def begin_new(
    uow: UnitOfWork,
    run: Run,
    created: RunEvent,
    agent: Agent,
    bus: RunEventBus,
    clock: Clock,
    *,
    thread_messages: int,
    history: Sequence[Message] | None = None,
    creation: "asyncio.Future[None] | None" = None,
) -> tuple[Began, RunEvent]:
    """Inside the unit of work that queues a run this process executes at once: the run is stored as `begin`
    would leave it (claimed, in_progress, with its run.in_progress event after `created`), and what its loop
    needs is read in the same transaction (its thread's messages, unless the caller knows them all: `history`;
    `thread_messages` is their count). The caller commits, then publishes `created` and the event returned.
    `creation`: the run may execute before that commit (see Began.created)."""
    run.start(clock.now())
    run.lease += 1  # claimed, as `begin` claims a queued run
    await uow.runs.add(run)
    await uow.run_events.add(created, run.org_id)
    events = RunEventStream(run.org_id, run.id, created.seq, bus, clock)
    started = await events.record(uow, RunInProgress.of(run))
    history, summary = await _context(uow, run, agent, history)
    if creation is not None:
        events.created_by(creation)
    began = Began(
        run=run,
        agent=agent,
        history=history,
        thread_messages=thread_messages,
        events=events,
        summary=summary,
        created=creation,
    )
    return began, started


async def _context(
    uow: UnitOfWork, run: Run, agent: Agent, known: Sequence[Message] | None = None
) -> tuple[list[Message], HistorySummary | None]:
    """What the run's loop builds its requests on: its thread's messages (read, unless `known`), and the thread's
    summary when the agent summarizes."""
    if known is None:
        known = await uow.messages.list(run.org_id, run.thread_id, limit=HISTORY_LIMIT, after_position=None)
    summary = None
    if agent.model_settings.summarize_history:
        summary = await uow.thread_summaries.get(run.org_id, run.thread_id)
    return list(known), summary


async def _counted(uow: UnitOfWork, run: Run, history: Sequence[Message]) -> int:
    """The count of the thread's messages, read after the claim (so it counts any message a previous holder stored
    before the claim took the run over): its last message's number (they are numbered 1, 2, ...), unless the
    history holds only the oldest of them."""
    if len(history) < HISTORY_LIMIT:
        return history[-1].position if history else 0
    thread = await uow.threads.get(run.org_id, run.thread_id)
    return thread.message_count if thread is not None else history[-1].position


class RunRecorder:
    def __init__(self, uow: UnitOfWork, clock: Clock, ids: IdGenerator, bus: RunEventBus) -> None:
        self._uow, self._clock, self._ids, self._bus = uow, clock, ids, bus

    async def begin(self, org_id: OrgId, run_id: RunId) -> Began | Run:
        """Start a queued run (a resumed one is in_progress already) and read what its loop needs; or, when
        there is nothing to execute, the run as it is. A resumed run may have had a holder that stopped
        without a last word (lost, or handed back): its events go on past any that holder published without
        storing them, from a run.in_progress event stored at once (see RunEventStream)."""
        async with self._uow as uow:
            claimed = await uow.runs.claim_to_execute(org_id, run_id)
            if claimed is None:
                raise RunNotFound(f"run {run_id} not found")
            run, last_seq = claimed.run, claimed.last_event_seq
            # A run that was executed before may have lost its process with its sub-agents' runs under way.
            lost_children = run.status is not RunStatus.QUEUED and run.delegated_in_its_last_step
            children_ended = await self._end_children(uow, run) if lost_children else []
            if run.asks_live and run.status is RunStatus.REQUIRES_ACTION:
                # Its open call asked the user, in a process that was lost (its job is taken again): gone with it.
                ended = await store_lost_end(
                    uow, claimed, RunErrorCode.WORKER_LOST, WORKER_LOST, self._bus, self._clock
                )
                await uow.commit()
                for event in [*children_ended, ended]:
                    await self._bus.publish(event)
                return run
            if run.status not in (RunStatus.QUEUED, RunStatus.IN_PROGRESS):
                if not children_ended:
                    run.lease -= 1  # nothing to execute: not claimed after all (nothing is committed)
                    return run
                await uow.commit()  # its sub-agents' runs ended (with its claim: it has nothing to execute)
                for event in children_ended:
                    await self._bus.publish(event)
                return run
            after_holder = run.status is RunStatus.IN_PROGRESS
            events = await RunEventStream.resume(
                uow, org_id, run_id, self._bus, self._clock, past_unstored=after_holder, last_seq=last_seq
            )
            agent = claimed.agent
            payload = self._starting(run, agent)
            history: list[Message] = []
            summary = None
            thread_messages = 0
            if agent is not None and run.status is RunStatus.IN_PROGRESS:
                history, summary = await _context(uow, run, agent)
                thread_messages = await _counted(uow, run, history)
            carrying_on = bool(run.answered_questions)
            in_flight = not carrying_on and _calls_in_flight(history)
            calls_again = in_flight and run.calls_may_be_made_again
            if payload is None and (run.answers_may_have_been_used if carrying_on else in_flight and not calls_again):
                # Whoever executed it stopped during its tool calls: they may have had effects, so not again.
                run.fail(RunErrorCode.WORKER_LOST, WORKER_LOST, self._clock.now())
                payload = run_ended(run)
            elif payload is None and after_holder:
                payload = RunInProgress.of(run)  # stored at once: the next taker numbers past it
            if calls_again and run.status is RunStatus.IN_PROGRESS:
                run.calls_made_again()  # stored with the claim: once only
            recorded = [await events.record(uow, payload)] if payload else []
            await uow.runs.save(run)
            await uow.commit()
        for event in children_ended:
            await self._bus.publish(event)
        await events.publish(*recorded)
        if agent is None or run.status is not RunStatus.IN_PROGRESS:
            return run
        return Began(
            run=run,
            agent=agent,
            history=history,
            thread_messages=thread_messages,
            events=events,
            summary=summary,
            calls_again=calls_again,
        )

    async def _end_children(self, uow: UnitOfWork, run: Run) -> list[RunEvent]:
        """The runs it delegated to that have not ended, and theirs (stored with their ends; their events to
        publish after commit). A sub-agent's run executes in the task of the run that delegated to it, and its
        answer is wanted only there: found unfinished by whoever takes that run on, it was lost with its process
        (claimed first: a process that was only thought lost can no longer write it)."""
        ended: list[RunEvent] = []
        parents = [run.id]
        while parents:  # a generation at a time (delegation goes a few deep)
            children = [c for parent in parents for c in await uow.runs.unfinished_children(run.org_id, parent)]
            for child_id in children:
                claimed = await uow.runs.claim(run.org_id, child_id)
                if claimed is None or claimed.run.status.is_terminal:  # it ended since it was read
                    continue
                lost = RunErrorCode.WORKER_LOST
                ended.append(await store_lost_end(uow, claimed, lost, SUB_AGENT_LOST, self._bus, self._clock))
            parents = children
        return ended

    def _starting(self, run: Run, agent: Agent | None) -> RunEventPayload | None:
        now = self._clock.now()
        if run.cancel_requested:
            run.cancel(now)
        elif agent is None:
            run.fail(RunErrorCode.AGENT_NOT_FOUND, "the run's agent was deleted", now)
        elif run.status is RunStatus.QUEUED:
            run.start(now)
            return RunInProgress.of(run)
        else:
            return None  # resumed: it was in progress already
        return run_ended(run)

    async def record_answer(self, state: RunState, answer: ModelAnswer) -> StepOutcome:
        """Store the model's answer and the step, with what follows from them: the run completes, is cancelled
        (someone asked meanwhile), or goes on to its tool calls."""
        await self.caught_up(state)
        run, response = state.run, answer.response
        step = self._step(state, answer)
        now = self._clock.now()
        run.record_step(step, now)
        going_on = copy(run)  # as it goes on, unless a cancel requested meanwhile wins
        payloads: list[RunEventPayload]
        if response.tool_calls:
            outcome, payloads = StepOutcome.CONTINUE, [_started(state, c) for c in response.tool_calls]
        else:
            going_on.complete(now)
            outcome, payloads = StepOutcome.FINISHED, [run_ended(going_on, response.text)]
        trimmed = _trimmed(step, answer)
        mark = state.events.mark()
        try:
            await self._store_answer(state, going_on, answer, [*trimmed, *payloads], now, unless_cancel_requested=True)
        except CancelRequested:  # nothing of it was written: the answer is stored with the run cancelled
            state.events.rewind(mark)
            run.cancel(now)
            await self._store_answer(state, run, answer, [*trimmed, run_ended(run)], now)
            return StepOutcome.CANCELLED
        state.run = going_on
        return outcome

    async def _store_answer(
        self,
        state: RunState,
        run: Run,
        answer: ModelAnswer,
        payloads: list[RunEventPayload],
        now: datetime,
        *,
        unless_cancel_requested: bool = False,
    ) -> None:
        await state.events.sent()  # the answer's text deltas leave the process first (not inside the transaction)
        async with self._uow as uow:
            # First: refused if the run was taken over (or, with unless_cancel_requested, if a cancel was asked
            # meanwhile), and then nothing else is written.
            await uow.runs.save(run, unless_cancel_requested=unless_cancel_requested)
            if answer.summary is not None:  # made for this step's request: later runs build on it
                await uow.thread_summaries.save(run.org_id, run.thread_id, answer.summary, now=now)
            message = await self._append(uow, state, MessageRole.ASSISTANT, _answer_content(answer), answer.message_id)
            recorded = [await state.events.record(uow, p) for p in payloads]
            await uow.commit()
        self._appended(state, message)
        await state.events.publish(*recorded)

    @staticmethod
    def _step(state: RunState, answer: ModelAnswer) -> RunStep:
        response, tools = answer.response, state.tools
        return RunStep(
            number=state.run.step_count + 1,
            model=response.model or state.agent.model,
            usage=response.usage + answer.summary_usage,
            finish_reason=response.finish_reason,
            started_at=answer.started_at,
            completed_at=answer.completed_at,
            tool_calls=tuple(
                StepToolCall(
                    id=c.id,
                    name=c.name,
                    type=tools.type_of(c.name),
                    pending=tools.waits_for_client(c.name),
                    may_call_again=tools.only_read([c.name]) and c.arguments_error is None,
                )
                for c in response.tool_calls
            ),
            context=_step_context(answer),
        )

    async def record_tool_results(
        self, state: RunState, calls: Sequence[ModelToolCall], results: StepResults
    ) -> StepOutcome:
        """Store the step's tool results in call order; the run goes on, or waits for the client's tools or the
        user's answers to the questions of the calls' servers. The answered questions of calls carried on with
        them are done. When the run goes on, this returns at once and they are stored beside its next model call
        (see the module's docstring)."""
        await self.caught_up(state)
        run = state.run
        pairs = list(zip(calls, results.outcomes, strict=True))
        content = tuple(
            ToolResultContent(tool_use_id=c.id, tool_name=c.name, result=o.text, is_error=o.is_error)
            for c, o in pairs
            if not o.waits
        )
        pending = tuple(o.pending for _, o in pairs if o.pending is not None)
        questions = tuple(q for _, o in pairs for q in o.questions)
        now = self._clock.now()
        if run.answered_questions:
            run.carried_on({c.id for c in calls}, now)
        run.settle_tool_calls({r.tool_use_id for r in content if r.is_error}, now)
        waits = bool(pending or questions)
        if waits:
            run.require_action(pending, now, questions)
        message = self._next_message(state, MessageRole.TOOL, content) if content else None
        if not waits:
            state.storing = asyncio.ensure_future(self._store_beside_model_call(state, results.completed, message))
            if message is not None:
                self._appended(state, message)
            return StepOutcome.CONTINUE
        recorded = await self._store_results(state, results.completed, message, requires_action=True)
        if message is not None:
            self._appended(state, message)
        await state.events.publish(*recorded)
        return StepOutcome.WAIT_FOR_CLIENT

    async def _store_beside_model_call(
        self, state: RunState, completed: list[RunEvent], message: Message | None
    ) -> list[RunEvent]:
        """The results stored once the next model call has built its request and begun to send it: this task is
        created first, and yields once so that the model call's task (created next) goes first (else this one
        builds and sends its statement first, and the model's answer comes later by as much)."""
        await asyncio.sleep(0)
        return await self._store_results(state, completed, message, requires_action=False)

    async def _store_results(
        self, state: RunState, completed: list[RunEvent], message: Message | None, *, requires_action: bool
    ) -> list[RunEvent]:
        """What record_tool_results stores; the run.requires_action event it stores, to publish. Nothing changes
        the run in memory until this is done (the next write of the run waits for it)."""
        run = state.run
        await state.events.sent()  # the step's unstored events (its tools' progress) before the results
        async with self._uow as uow:
            await uow.runs.save(run)  # first: refused if the run was taken over, and then nothing else is written
            for event in completed:
                await uow.run_events.add(event, run.org_id)
            if message is not None:
                await _store_message(uow, message)
            recorded = [await state.events.record(uow, RunRequiresAction.of(run))] if requires_action else []
            await uow.commit()
        return recorded

    async def caught_up(self, state: RunState) -> None:
        """Wait until the tool results stored beside the model call are stored; raises what storing them raised
        (LeaseLost, StorageUnavailable...). Every write of the run calls this first."""
        storing = state.storing
        if storing is None:
            return
        try:
            await asyncio.shield(storing)  # a cancel of the run (or its hand-back) does not cut the write short
        except asyncio.CancelledError:
            if storing.done() and not storing.cancelled() and storing.exception() is None:
                state.storing = None
            raise  # else the run's next write waits for it again, or raises its failure (which this cancel hid)
        except BaseException:
            state.storing = None  # its failure, raised here
            raise
        state.storing = None

    async def caught_up_quietly(self, state: RunState) -> None:
        """The same, for a run that stops anyway: what storing raised says nothing more."""
        try:
            await self.caught_up(state)
        except RunNotCreated:
            raise  # not a write that failed: the run does not exist, and nothing else is to be written
        except Exception:
            logger.debug("a run's tool results were not stored as it stopped", extra={"run_id": str(state.run.id)})

    async def fail(self, state: RunState, code: str, message: str) -> StepOutcome:
        await self._end(state, lambda run, now: run.fail(code, message, now))
        return StepOutcome.FAILED

    async def fail_as_stored(self, state: RunState, code: str, message: str) -> StepOutcome:
        """Fail the run as stored, unless it ended meanwhile; `state.run` becomes the stored run."""
        await self.caught_up_quietly(state)  # it failed, or the run in memory is ahead of what is stored anyway
        run = state.run
        async with self._uow as uow:
            stored = await uow.runs.get(run.org_id, run.id, for_update=True)
            if stored is None:  # deleted with its thread
                return StepOutcome.FAILED
            if stored.lease != run.lease:
                raise LeaseLost(f"run {run.id} was taken over by another process")
            ended = None
            if not stored.status.is_terminal:
                stored.trace_id = stored.trace_id or run.trace_id
                stored.warnings = stored.warnings or run.warnings
                stored.fail(code, message, self._clock.now())
                # Numbered by this holder's own stream: past the unstored events it published.
                ended = await state.events.record(uow, run_ended(stored))
                await uow.runs.save(stored)
                await uow.commit()
        state.run = stored
        if ended is not None:
            await state.events.publish(ended)
        return StepOutcome.FAILED

    async def fail_unstarted(self, org_id: OrgId, run_id: RunId) -> Run | None:
        """End a run that `begin` could not start for an unexpected error (a bug, data it cannot read): claimed (so
        nothing of a start half made writes it any more) and failed as internal_error (cancelled, if that was asked),
        unless it ended meanwhile; else it would stay queued or in progress, its thread busy, while its process
        lives. The run as stored; None when it is gone."""

        def failed(run: Run, now: datetime) -> bool:
            run.end_after_its_process(RunErrorCode.INTERNAL_ERROR, NOT_STARTED, now)
            return True

        run, _ = await end_claimed(
            self._uow, lambda uow: uow.runs.claim(org_id, run_id), failed, self._bus, self._clock
        )
        return run

    async def stored(self, run: Run) -> Run:
        """The run as stored (or as given, if it was deleted meanwhile)."""
        async with self._uow.read_only() as uow:
            return await uow.runs.get(run.org_id, run.id) or run

    async def interrupt(self, state: RunState) -> StepOutcome:
        await self._end(state, lambda run, now: run.interrupt(now))
        return StepOutcome.FAILED

    async def cancel(self, state: RunState) -> StepOutcome:
        await self._end(state, lambda run, now: run.cancel(now))
        return StepOutcome.CANCELLED

    async def _end(self, state: RunState, end: Callable[[Run, datetime], None]) -> None:
        await self.caught_up(state)
        await state.events.sent()
        async with self._uow as uow:
            end(state.run, self._clock.now())
            await uow.runs.save(state.run)  # first: refused if the run was taken over
            event = await state.events.record(uow, run_ended(state.run))
            await uow.commit()
        await state.events.publish(event)

    async def _append(
        self,
        uow: UnitOfWork,
        state: RunState,
        role: MessageRole,
        content: tuple[ContentPart, ...],
        message_id: MessageId | None = None,
    ) -> Message:
        """The run's next message in its thread, stored with the unit of work (counted by `_appended` once it is)."""
        message = self._next_message(state, role, content, message_id)
        await _store_message(uow, message)
        return message

    def _next_message(
        self, state: RunState, role: MessageRole, content: tuple[ContentPart, ...], message_id: MessageId | None = None
    ) -> Message:
        run = state.run
        return message_after(
            state.thread_messages,
            org_id=run.org_id,
            thread_id=run.thread_id,
            role=role,
            content=content,
            message_id=message_id or MessageId(self._ids.new()),
            now=self._clock.now(),
            run_id=run.id,
        )

    @staticmethod
    def _appended(state: RunState, message: Message) -> None:
        state.thread_messages = message.position
        state.history.append(message)


async def _store_message(uow: UnitOfWork, message: Message) -> None:
    await uow.threads.counted(message.org_id, message.thread_id, message.position, message.created_at)
    await uow.messages.add(message)


def _answer_content(answer: ModelAnswer) -> tuple[ContentPart, ...]:
    """The answer as a message: its text (kept even when empty if there is nothing else), then its tool calls."""
    response = answer.response
    text: list[ContentPart] = [TextContent(text=response.text)] if response.text or not response.tool_calls else []
    calls = [ToolUseContent(id=c.id, name=c.name, params=dict(c.arguments)) for c in response.tool_calls]
    return (*text, *calls)


def _step_context(answer: ModelAnswer) -> StepContext | None:
    fit = answer.context
    if fit is None:
        return None
    return StepContext(
        messages_sent=len(fit.messages),
        messages_dropped=fit.messages_dropped,
        tool_results_cut=fit.tool_results_cut,
        estimated_tokens=fit.estimated_tokens,
        budget_tokens=fit.budget_tokens,
        messages_summarized=fit.messages_summarized,
    )


def _trimmed(step: RunStep, answer: ModelAnswer) -> list[ContextTrimmed]:
    """The event saying what the step's request left out of the thread, if anything."""
    fit = answer.context
    if fit is None or not fit.trimmed:
        return []
    return [
        ContextTrimmed(
            step=step.number,
            messages_dropped=fit.messages_dropped,
            tool_results_cut=fit.tool_results_cut,
            estimated_tokens=fit.estimated_tokens,
            budget_tokens=fit.budget_tokens,
            messages_summarized=fit.messages_summarized,
        )
    ]


def _started(state: RunState, call: ModelToolCall) -> ToolCallStarted:
    return ToolCallStarted(
        tool_call_id=call.id, name=call.name, tool_type=state.tools.type_of(call.name), arguments=dict(call.arguments)
    )
