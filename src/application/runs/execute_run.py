"""ExecuteRun: the LLM <-> tools loop of one run."""

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from typing import Protocol

from application.errors import Conflict, LeaseLost, ModelError, RunNotFound, StorageUnavailable
from application.ports.execution import HANDED_BACK, INTERRUPTED
from application.ports.llm import ModelToolCall
from application.ports.tracing import Level, RunTrace, Tracer
from application.runs.events import RunNotCreated
from application.runs.model_call import ModelAnswer, ModelCall
from application.runs.recorder import WORKER_LOST, Began, RunRecorder
from application.runs.step import RunState, StepOutcome
from application.runs.tools.assembly import ToolAssembler
from application.runs.tools.calls import ToolCalls
from domain.ids import OrgId, RunId
from domain.messages import MessageRole, ToolUseContent
from domain.runs import Run, RunErrorCode, RunStatus

logger = logging.getLogger(__name__)
STORAGE_FAILURE = "the database became unavailable while the run was executing"
CALLS_AHEAD_TURNS = 6
"""Turns of the event loop the tool calls of a step get before the step's storage starts, when they begin beside it
(they only read): enough for an MCP call's request to leave (the SDK hands it through three tasks of its session
before it is written). Else the storage's work (the step, its events, its statement) and whatever waited with it
took the loop first, and the request left a millisecond later, on the run's path; now that work is done while the
server answers. Measured with bench.runs one run at a time, in turns against the previous order: 0.1x of the bare
loop less on PostgreSQL, 0.15x on SQLite."""


class RunExecution(Protocol):
    """What executes a run: ExecuteRun itself, or ExecuteRun wrapped (counted in the metrics)."""

    async def execute(
        self,
        org_id: OrgId,
        run_id: RunId,
        *,
        depth: int = 0,
        live_questions: bool = True,
        hand_back_on_outage: bool = False,
        began: Began | None = None,
    ) -> Run: ...


class ExecuteRun:
    """Runs a queued (or resumed) run, step by step, until it completes, fails, is cancelled or waits for the
    client's tool results. A step is one model call and the tool calls it asks for; each step is stored before
    anything of the next is (its tool results beside the next model call: see RunRecorder), and before its tool
    calls begin unless they only read (they begin just before it is stored), and no transaction is open during a
    model or tool call."""

    def __init__(
        self,
        *,
        recorder: RunRecorder,
        assembler: ToolAssembler,
        model: ModelCall,
        tools: ToolCalls,
        tracer: Tracer,
    ) -> None:
        self._recorder, self._assembler, self._model, self._tools = recorder, assembler, model, tools
        self._tracer = tracer

    async def execute(
        self,
        org_id: OrgId,
        run_id: RunId,
        *,
        depth: int = 0,
        live_questions: bool = True,
        hand_back_on_outage: bool = False,
        began: Began | None = None,
    ) -> Run:
        """The run as it stands when it stops: ended, or waiting for the client. Raises RunNotFound, or
        StorageUnavailable when the run cannot be started (it stays queued, for recovery). `live_questions`:
        whether its tool calls may wait for the user's answers while they are open (no, when nobody could answer
        through the run API: a run asked for over MCP or by another run). `hand_back_on_outage`: a run whose
        step (or cancellation) cannot be stored (the database did not answer in time) is not failed but left as
        stored, and StorageUnavailable raised, for whoever executes it to start it again shortly: it goes on
        from its last stored step, or ends as its stored cancel request says (a worker's job is retried). `began`:
        the run was started in the transaction that created it (see queue_run), and this is what it read."""
        if began is None:
            begun = await self._begun(org_id, run_id)
            if isinstance(begun, Run):
                return begun
            began = begun
        state = RunState(
            run=began.run,
            agent=began.agent,
            history=began.history,
            thread_messages=began.thread_messages,
            events=began.events,
            history_summary=began.summary,
            trace=self._trace(began),
            depth=depth,
            live_questions=live_questions,
            storing=began.created,  # a run executing as its creation commits writes nothing before it has
        )
        try:
            return await self._executed(state, hand_back_on_outage=hand_back_on_outage, calls_again=began.calls_again)
        except RunNotCreated:
            # It began to execute as the transaction creating it committed, and that commit failed or was cut
            # short: nothing of the execution was written or published (a commit cut short after the server made
            # it leaves the run as stored, in progress, for recovery).
            logger.info(
                "run not created (its creating transaction did not commit): it stops", extra={"run_id": str(run_id)}
            )
            state.trace.end(level=Level.WARNING, status_message="not created")
            return state.run

    async def _begun(self, org_id: OrgId, run_id: RunId) -> Began | Run:
        """`RunRecorder.begin`; a run it could not start for an unexpected error fails (internal_error) instead of
        staying queued or in progress while its process lives. Raises RunNotFound; StorageUnavailable or Conflict
        (the run stays as stored, to be tried again); or the error itself when the run cannot even be claimed to
        record that (its own stored row is what cannot be read)."""
        try:
            return await self._recorder.begin(org_id, run_id)
        except (RunNotFound, StorageUnavailable, Conflict):
            raise
        except Exception as error:
            logger.exception("run could not start: it fails", extra={"run_id": str(run_id)})
            try:
                ended = await self._recorder.fail_unstarted(org_id, run_id)
            except StorageUnavailable:
                raise
            except Exception:
                logger.exception("a run that could not start could not be failed either", extra={"run_id": str(run_id)})
                raise error from None
            if ended is None:
                raise RunNotFound(f"run {run_id} not found") from None
            return ended

    async def _executed(self, state: RunState, *, hand_back_on_outage: bool, calls_again: bool) -> Run:
        run_id = state.run.id
        try:
            await self._loop(state, calls_again=calls_again)
        except asyncio.CancelledError as cancelled:
            if HANDED_BACK in cancelled.args:
                await self._recorder.caught_up_quietly(state)  # its job ends after the step is stored, or refused
                state.trace.end(level=Level.WARNING, status_message="handed back to the queue")
                raise
            interrupted = INTERRUPTED in cancelled.args
            await self._settle_cancelled(state, interrupted=interrupted, hand_back_on_outage=hand_back_on_outage)
            state.trace.end(level=Level.WARNING, status_message="interrupted" if interrupted else "cancelled")
            raise
        except LeaseLost:
            # Another process took the run over (this one was thought lost): it goes on there, and this one
            # stops without another word, since everything it would write is refused.
            logger.info("run taken over by another process: this one stops", extra={"run_id": str(run_id)})
            await self._recorder.caught_up_quietly(state)
            state.trace.end(level=Level.WARNING, status_message="taken over by another process")
            return await self._recorder.stored(state.run)
        except RunNotCreated:
            raise  # see execute
        except StorageUnavailable as error:
            await self._recorder.caught_up_quietly(state)
            if hand_back_on_outage:
                logger.warning("run paused, to go on shortly: %s", error.detail, extra={"run_id": str(run_id)})
                state.trace.end(level=Level.WARNING, status_message="paused: the database did not answer")
                raise
            logger.warning("run stopped: %s", error.detail, extra={"run_id": str(run_id)})
            await self._fail_for_storage(state)
        except Exception:
            logger.exception("run failed unexpectedly", extra={"run_id": str(run_id)})
            await self._fail_unexpectedly(state, hand_back_on_outage=hand_back_on_outage)
        _end_trace(state)
        return state.run

    def _trace(self, began: Began) -> RunTrace:
        run, agent = began.run, began.agent
        trace = self._tracer.start_run(
            name="run",
            run_id=str(run.id),
            thread_id=str(run.thread_id),
            org_id=str(run.org_id),
            agent_id=str(agent.id),
            metadata={"agent": agent.slug, "model": agent.model, "parent_run_id": str(run.parent_run_id or "")},
            trace_id=run.trace_id,
        )
        if run.trace_id is None:
            run.trace_id = trace.trace_id
        return trace

    async def _loop(self, state: RunState, *, calls_again: bool) -> StepOutcome:
        state.tools = await self._assembler.assemble(state.agent, state.run.client_tools)
        for warning in state.tools.warnings:
            state.run.warn(warning)
        outcome = StepOutcome.CONTINUE
        if state.run.answered_questions:
            outcome = await self._carry_on(state)
        elif calls_again:
            outcome = await self._call_again(state)
        while outcome is StepOutcome.CONTINUE:
            outcome = await self._step(state)
        return outcome

    async def _carry_on(self, state: RunState) -> StepOutcome:
        """The tool calls whose servers asked the user questions, made again with the answers (before the model
        is called: it reads their results)."""
        asked = {q.tool_call_id for q in state.run.answered_questions}
        calls = [call for call in _latest_tool_calls(state) if call.id in asked]
        return await self._recorder.record_tool_results(state, calls, await self._tools(state, calls))

    async def _call_again(self, state: RunState) -> StepOutcome:
        """The last step's tool calls, in flight when the run's previous holder stopped: each only read, so they are
        made again (Began.calls_again), if their tools still only read (a tool's name may mean another tool now,
        or its server may say otherwise)."""
        calls = _latest_tool_calls(state)
        if not state.tools.only_read(call.name for call in calls):
            return await self._recorder.fail(state, RunErrorCode.WORKER_LOST, WORKER_LOST)
        logger.info("the tool calls in flight when the run stopped are made again", extra={"run_id": str(state.run.id)})
        return await self._recorder.record_tool_results(state, calls, await self._tools(state, calls))

    async def _step(self, state: RunState) -> StepOutcome:
        """One model call, and the tool calls it asks for."""
        max_steps = state.agent.max_steps
        if state.run.step_count >= max_steps:
            message = f"the agent was still calling tools after {max_steps} steps"
            return await self._recorder.fail(state, RunErrorCode.MAX_STEPS_EXCEEDED, message)
        try:
            answer = await self._answer(state)
        except ModelError as error:
            return await self._recorder.fail(state, error.code, error.detail)
        calls = answer.response.tool_calls
        if calls and state.tools.only_read(c.name for c in calls):
            return await self._while_stored(state, answer, calls)
        outcome = await self._recorder.record_answer(state, answer)
        if outcome is not StepOutcome.CONTINUE:
            return outcome
        return await self._recorder.record_tool_results(state, calls, await self._tools(state, calls))

    async def _while_stored(self, state: RunState, answer: ModelAnswer, calls: Sequence[ModelToolCall]) -> StepOutcome:
        """Tool calls that only read (their servers say so) begin while the step asking for them is stored: a
        process that stops in between leaves the step unstored, and the calls are made again (they read again)
        when the run goes on. What they tell the run's followers waits for the step's events (see ToolCalls); if
        the step does not go on (cancelled meanwhile, or not stored), they are cancelled. The calls go first: their
        requests leave before the step's storage takes the event loop (see CALLS_AHEAD_TURNS)."""
        going_on = asyncio.get_running_loop().create_future()

        def settled(recorded: "asyncio.Future[StepOutcome]") -> None:
            # (the first callback of `recording`: the calls' events wait for this, never for `recording` itself)
            if not recorded.cancelled() and recorded.exception() is None and recorded.result() is StepOutcome.CONTINUE:
                going_on.set_result(None)
            else:
                going_on.cancel()

        calling = asyncio.ensure_future(self._tools(state, calls, after=going_on))
        try:
            for _ in range(CALLS_AHEAD_TURNS):
                await asyncio.sleep(0)
            recording = asyncio.ensure_future(self._recorder.record_answer(state, answer))
            recording.add_done_callback(settled)
            outcome = await recording
            if outcome is not StepOutcome.CONTINUE:
                return outcome
            results = await calling
        finally:
            if not going_on.done():  # (cancelled before the step's storage began: nothing of the calls is told)
                going_on.cancel()
            if not calling.done():
                # The step stopped the run, was not stored, or this task was cancelled: the calls stop, and what
                # they publish as they stop comes before whatever ends the run.
                calling.cancel()
                await asyncio.wait((calling,))
            if not calling.cancelled():
                calling.exception()  # seen: when the step failed too, its failure is the one raised
        return await self._recorder.record_tool_results(state, calls, results)

    async def _answer(self, state: RunState) -> ModelAnswer:
        """The model's answer. The last step's tool results may still be being stored (the model reads them from
        memory): if storing them fails, the model call is stopped and that failure raised."""
        storing = state.storing
        if storing is None or storing.done():
            await self._recorder.caught_up(state)
            return await self._model(state)
        call = asyncio.ensure_future(self._model(state))
        try:
            await asyncio.wait((storing, call), return_when=asyncio.FIRST_COMPLETED)
            if storing.done():
                await self._recorder.caught_up(state)
            return await call
        finally:
            if not call.done():
                call.cancel()  # the storing failed, or this task was cancelled
            elif not call.cancelled():
                call.exception()  # seen: when the storing failed too, its failure is the one raised

    async def _settle_cancelled(self, state: RunState, *, interrupted: bool, hand_back_on_outage: bool) -> None:
        """Record the cancellation (or the interruption, at shutdown), though this task is being cancelled. One
        that cannot be stored, when the run is to be handed back on an outage, raises StorageUnavailable instead
        of the cancellation: the run goes on as stored when it is taken again, and its stored cancel request
        ends it then."""
        if state.run.status.is_terminal:
            return
        ending = self._recorder.interrupt(state) if interrupted else self._recorder.cancel(state)
        try:
            await _shielded(ending, state, hand_back_on_outage=hand_back_on_outage)
        except StorageUnavailable:
            logger.warning(
                "a run's cancellation could not be stored: it is tried again shortly",
                extra={"run_id": str(state.run.id)},
            )
            state.trace.end(level=Level.WARNING, status_message="cancelled; not stored yet")
            raise

    async def _fail_unexpectedly(self, state: RunState, *, hand_back_on_outage: bool) -> None:
        if state.run.status.is_terminal:
            return
        try:
            await self._recorder.fail(state, RunErrorCode.INTERNAL_ERROR, "the run failed unexpectedly")
        except RunNotCreated:
            raise  # there is no run to fail (see execute)
        except LeaseLost:
            pass  # another process holds the run now
        except StorageUnavailable as error:
            if hand_back_on_outage:
                state.trace.end(level=Level.ERROR, status_message="failed unexpectedly; not stored yet")
                raise
            _left_for_recovery(state, error)
        except Exception:
            logger.exception("could not record a run's failure", extra={"run_id": str(state.run.id)})

    async def _fail_for_storage(self, state: RunState) -> None:
        """Best effort: the database may be back already. If not, the run stays as stored, for recovery."""
        try:
            await self._recorder.fail_as_stored(state, RunErrorCode.STORAGE_UNAVAILABLE, STORAGE_FAILURE)
        except RunNotCreated:
            raise  # there is no run to fail (see execute)
        except LeaseLost:
            pass  # another process holds the run now
        except StorageUnavailable as error:
            _left_for_recovery(state, error)
        except Exception:
            logger.exception("could not record a run's failure", extra={"run_id": str(state.run.id)})


def _latest_tool_calls(state: RunState) -> list[ModelToolCall]:
    """The tool calls of the model's latest answer in the thread."""
    for message in reversed(state.history):
        if message.role is MessageRole.ASSISTANT:
            return [
                ModelToolCall(id=part.id, name=part.name, arguments=dict(part.params))
                for part in message.content
                if isinstance(part, ToolUseContent)
            ]
    return []


def _left_for_recovery(state: RunState, error: StorageUnavailable) -> None:
    """Logged without a traceback: the database is down, the code is fine. RecoverRuns settles the run later."""
    logger.warning(
        "could not record how a run ended, left for recovery: %s", error.detail, extra={"run_id": str(state.run.id)}
    )


async def _shielded(ending: Awaitable[StepOutcome], state: RunState, *, hand_back_on_outage: bool) -> None:
    try:
        await asyncio.shield(ending)
    except (asyncio.CancelledError, LeaseLost):
        pass  # LeaseLost: another process holds the run now, and records how it ends
    except StorageUnavailable as error:
        if hand_back_on_outage:
            raise
        _left_for_recovery(state, error)
    except RunNotCreated:
        raise  # there is no run to end (see ExecuteRun.execute)
    except Exception:
        logger.exception("could not record how a run ended", extra={"run_id": str(state.run.id)})


def _end_trace(state: RunState) -> None:
    run = state.run
    failed = run.status is RunStatus.FAILED
    state.trace.end(
        output=run.status.value,
        level=Level.ERROR if failed else Level.DEFAULT,
        status_message=run.error.message if run.error else None,
    )
