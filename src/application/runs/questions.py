"""Questions a server asks during a tool call that is still open (handshake-era elicitation, `elicitation/create`).

The run waits in `requires_action` with the question, while the call stays open in the process that executes the
run; the user's answer may reach any process (`POST /v1/runs/{id}/answers`) and is stored with the run, where the
waiting call reads it. Nobody answering within the timeout is a `cancel` for the server, and a
warning on the run. If the process is lost meanwhile, the call is lost with it: the run fails `worker_lost` when it
is recovered, as with any call in flight.
"""

import asyncio
import logging

from application.ports.execution import RunEventBus, RunSubscription
from application.ports.mcp import McpAnswer, McpQuestion
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.runs.step import RunState
from domain.elicitation import Elicitation, ElicitationAction, ElicitationAnswer
from domain.run_events import RunInProgress, RunRequiresAction
from domain.runs import Run, RunStatus

logger = logging.getLogger(__name__)

CHECK_SECONDS = 1.0
"""How often a waiting call reads the run for the answer (the answer may reach any process; it is stored with
the run, and no event announces it: the events of a run are numbered by the process that executes it)."""


class LiveQuestions:
    def __init__(
        self,
        uow: UnitOfWork,
        clock: Clock,
        ids: IdGenerator,
        bus: RunEventBus,
        timeout_seconds: float,
        check_seconds: float = CHECK_SECONDS,
    ) -> None:
        self._uow, self._clock, self._ids, self._bus = uow, clock, ids, bus
        self._timeout, self._check = timeout_seconds, check_seconds

    async def ask(self, state: RunState, tool_call_id: str, tool_name: str, question: McpQuestion) -> McpAnswer:
        """The user's answer to the question of this call's server, once given (or a cancel, after the timeout)."""
        asked = Elicitation.asked(
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            key=f"ask-{self._ids.new().hex[-12:]}",  # the random end of the id (its start is the time)
            message=question.message,
            requested_schema=question.requested_schema,
            live=True,
        )
        span = state.trace.span(
            "user_question",
            input={"message": asked.message, "requested_schema": dict(asked.requested_schema)},
            metadata={"toolCallId": tool_call_id, "elicitationId": asked.id, "operationType": "elicitation"},
        )
        async with self._bus.subscribe(state.run.id) as events:  # wakes the wait when the run changes (a cancel)
            async with self._uow as uow:
                state.run.ask_live(asked, self._clock.now())
                await uow.runs.save(state.run)  # refused if the run was taken over
                recorded = await state.events.record(uow, RunRequiresAction.of(state.run))
                await uow.commit()
            await state.events.publish(recorded)
            answer = await self._answer(state, asked, events)
        span.end(output=answer.action.value, metadata={"content": dict(answer.content or {})})
        return McpAnswer(action=answer.action.value, content=answer.content)

    async def _answer(self, state: RunState, asked: Elicitation, events: RunSubscription) -> ElicitationAnswer:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while True:
            answer = await self._given(state, asked)
            if answer is not None:
                return answer
            left = deadline - loop.time()
            if left <= 0:
                return await self._withdraw(state, asked)
            try:
                async with asyncio.timeout(min(self._check, left)):
                    await events.next()  # something happened to the run: read it again
            except TimeoutError:
                pass

    async def _given(self, state: RunState, asked: Elicitation) -> ElicitationAnswer | None:
        """The answer, if the run has it (then the question is done); a cancel when the run ended meanwhile."""
        run = state.run
        async with self._uow.read_only() as uow:
            stored = await uow.runs.get(run.org_id, run.id)
        if stored is None or stored.status.is_terminal:
            return ElicitationAnswer(action=ElicitationAction.CANCEL)
        answer = _answer_of(stored, asked)
        if answer is not None:
            await self._done(state, asked)
        return answer

    async def _done(self, state: RunState, asked: Elicitation, *, timed_out: bool = False) -> ElicitationAnswer | None:
        """The question is done: the run announced in progress again when nothing else waits. Timed out, the run
        is read again under lock first: an answer that came just in time is taken (returned), else the question is
        withdrawn with a warning."""
        run = state.run
        answer = None
        async with self._uow as uow:
            if timed_out:
                stored = await uow.runs.get(run.org_id, run.id, for_update=True)
                answer = _answer_of(stored, asked) if stored is not None else None
            run.took_answer(asked.id, self._clock.now())
            if timed_out and answer is None:
                run.warn(
                    f"nobody answered the question of tool call {asked.tool_call_id} within {self._timeout:g} s: "
                    "its server was told the user cancelled"
                )
            await uow.runs.save(run)
            going_on = run.status is RunStatus.IN_PROGRESS
            recorded = [await state.events.record(uow, RunInProgress.of(run))] if going_on else []
            await uow.commit()
        await state.events.publish(*recorded)
        return answer

    async def _withdraw(self, state: RunState, asked: Elicitation) -> ElicitationAnswer:
        answer = await self._done(state, asked, timed_out=True)
        if answer is not None:
            return answer  # answered just in time
        logger.info("a question of a tool call went unanswered", extra={"run_id": str(state.run.id)})
        return ElicitationAnswer(action=ElicitationAction.CANCEL)


def _answer_of(stored: Run, asked: Elicitation) -> ElicitationAnswer | None:
    question = next((q for q in stored.awaiting_input if q.id == asked.id), None)
    return question.answer if question is not None else None
