"""An agent answers one input in a thread of its own, as a real run: a sub-agent's task in a run, or a call
of a published agent over MCP."""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from application.caller import Caller
from application.errors import StorageUnavailable
from application.ports.execution import HANDED_BACK, INTERRUPTED, RunEventBus
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.runs.answer_questions import AnswerQuestions, AnswerQuestionsCommand, QuestionAnswer
from application.runs.events import end_claimed, store_ending
from application.runs.execute_run import RunExecution
from application.runs.queueing import new_thread, queue_run
from domain.agents import Agent
from domain.elicitation import Elicitation, ElicitationAnswer
from domain.errors import DomainError
from domain.ids import OrgId, RunId
from domain.runs import Run, RunStatus

logger = logging.getLogger(__name__)

Progress = Callable[[float, str], Awaitable[None]]
Answerer = Callable[[Sequence[Elicitation]], Awaitable[Sequence[tuple[str, ElicitationAnswer]]]]
"""Asks the caller the questions a run waits for, now (an MCP client of the handshake era): the answers by id."""
NEEDS_CLIENT = "the agent needs tools that a client runs, which no one can run here"
NEEDS_ANSWERS = "the agent's tools ask the user questions, and no one here can answer them"
ANSWER_ROUNDS = 10
"""How many times in one call the caller is asked before the run is left to wait."""
END_LEFT_SECONDS = 5.0
"""How long the cancel of a run its caller left may take (the caller, or the run that delegated to it, waits for it:
it already waited for the run's start, which failed for an outage)."""


@dataclass(frozen=True, kw_only=True)
class Question:
    agent: Agent
    input: str
    title: str
    """The title of the thread the run gets."""
    progress: Progress | None = None
    """Told 0.0 "Starting agent", then 1.0 "Completed" or "Failed"."""
    parent_run_id: RunId | None = None
    depth: int = 0
    """How deep in delegation the new run is."""
    answerer: Answerer | None = None
    """Asks the caller the questions of the run's tools now (the run goes on with the answers)."""
    answers_later: bool = False
    """The caller answers the run's questions in a call of its own (an MCP client of 2026-07-28, given the run's
    questions and its id as state): a run that waits for answers is left waiting."""


@dataclass(frozen=True, kw_only=True)
class Resumption:
    """The caller's answers to the questions a run asked for it waits for, given later (see Question)."""

    caller: Caller
    run_id: RunId
    answers: Sequence[QuestionAnswer]
    progress: Progress | None = None
    answerer: Answerer | None = None


@dataclass(frozen=True, kw_only=True)
class Answer:
    run: Run
    text: str
    """The agent's answer; when the run did not complete, why."""

    @property
    def failed(self) -> bool:
        return self.run.status is not RunStatus.COMPLETED and not self.questions

    @property
    def questions(self) -> tuple[Elicitation, ...]:
        """What the run waits for the caller to answer (it waits for nothing else)."""
        return _questions(self.run)


def _questions(run: Run) -> tuple[Elicitation, ...]:
    if run.status is not RunStatus.REQUIRES_ACTION or run.required_action:
        return ()
    return run.open_questions


class AskAgent:
    """The run executes in the caller's task: cancelling the caller cancels the run. A run that waits for
    client tools is cancelled, since no client is there to run them; one that waits for answers to its tools'
    questions has them from the caller when it can answer (now, or in a call of its own), else is cancelled."""

    def __init__(
        self,
        uow: UnitOfWork,
        clock: Clock,
        ids: IdGenerator,
        bus: RunEventBus,
        runs: Callable[[], RunExecution],
        answer: Callable[[], AnswerQuestions],
    ) -> None:
        self._uow, self._clock, self._ids, self._bus, self._runs = uow, clock, ids, bus, runs
        self._answer = answer

    async def execute(self, question: Question) -> Answer:
        queued = await self._queue(question)
        async with self._ended_if_left(queued.org_id, queued.id):
            if question.progress is not None:
                await question.progress(0.0, "Starting agent")
            run = await self._runs().execute(queued.org_id, queued.id, depth=question.depth, live_questions=False)
        return await self._settle(run, question.progress, question.answerer, question.answers_later)

    async def resume(self, resumption: Resumption) -> Answer:
        """The caller's answers to the questions the run waits for; the run goes on, here. Raises RunNotFound,
        RunNotWaiting, InvalidValue (an answer its question's form refuses)."""
        run = await self._answer().execute(
            AnswerQuestionsCommand(
                caller=resumption.caller,
                run_id=resumption.run_id,
                answers=resumption.answers,
            )
        )
        async with self._ended_if_left(run.org_id, run.id):
            run = await self._runs().execute(run.org_id, run.id, live_questions=False)
        return await self._settle(run, resumption.progress, resumption.answerer, answers_later=True)

    async def _settle(
        self, run: Run, progress: Progress | None, answerer: Answerer | None, answers_later: bool
    ) -> Answer:
        rounds = 0
        while answerer is not None and _questions(run) and rounds < ANSWER_ROUNDS:
            rounds += 1
            given = await answerer(_questions(run))
            answers = [QuestionAnswer(question_id=i, action=a.action, content=a.content) for i, a in given]
            try:
                run = await self._answer().execute(
                    AnswerQuestionsCommand(caller=Caller.operator(run.org_id), run_id=run.id, answers=answers)
                )
            except DomainError as refused:  # an answer its question's form refuses: the run is cancelled
                await self._cancel_waiting(run)
                return Answer(run=await self._stored(run), text=refused.detail)
            async with self._ended_if_left(run.org_id, run.id):
                run = await self._runs().execute(run.org_id, run.id, live_questions=False)
        text = await self._text(run)
        if run.status is RunStatus.REQUIRES_ACTION and not (answers_later and _questions(run)):
            await self._cancel_waiting(run)
            run = await self._stored(run)
        answer = Answer(run=run, text=text)
        if progress is not None and not answer.questions:
            await progress(1.0, "Failed" if answer.failed else "Completed")
        return answer

    @contextlib.asynccontextmanager
    async def _ended_if_left(self, org_id: OrgId, run_id: RunId) -> AsyncIterator[None]:
        """The run, executed in the caller's task, has no job: when that task is cancelled (the caller went away),
        or the run cannot start (the database did not answer), once this task queued the run or gave it its answers
        and before its execution took it on, it would stay queued or in progress, with no one to execute it, while
        this process lives. It is cancelled then, if the database answers within END_LEFT_SECONDS (a run its
        execution took on records its own end: nothing more is done); failed as interrupted when the cancellation
        says its process shuts down (a sub-agent's run, in-process); left to whoever takes on the run that
        delegated to it when that run is handed back (RunRecorder.begin). A cancel that cuts short the commit that
        queues the run or stores its answers is not covered: see the README's worker mode on stranded runs."""
        try:
            yield
        except asyncio.CancelledError as cancelled:
            if HANDED_BACK not in cancelled.args:
                await asyncio.shield(self._end_left(org_id, run_id, interrupted=INTERRUPTED in cancelled.args))
            raise
        except StorageUnavailable:
            await asyncio.shield(self._end_left(org_id, run_id))
            raise

    async def _end_left(self, org_id: OrgId, run_id: RunId, *, interrupted: bool = False) -> None:
        """Cancelled, or failed as interrupted, unless it ended (end_claimed); left as it is if the database does not
        answer in time."""

        def ended(run: Run, now: datetime) -> bool:
            if interrupted:
                run.interrupt(now)
            else:
                run.cancel(now)
            return True

        try:
            async with asyncio.timeout(END_LEFT_SECONDS):
                await end_claimed(self._uow, lambda uow: uow.runs.claim(org_id, run_id), ended, self._bus, self._clock)
        except (StorageUnavailable, TimeoutError) as error:
            # Left as it is: in worker mode the runs with no job of a process gone silent end (RecoverRuns).
            detail = error.detail if isinstance(error, StorageUnavailable) else "the database did not answer in time"
            logger.warning("a run its caller left could not be cancelled: %s", detail, extra={"run_id": str(run_id)})

    async def _queue(self, question: Question) -> Run:
        async with self._uow as uow:
            thread = await new_thread(uow, clock=self._clock, ids=self._ids, agent=question.agent, title=question.title)
            queued = await queue_run(
                uow,
                clock=self._clock,
                ids=self._ids,
                thread=thread,
                agent=question.agent,
                input=question.input,
                parent_run_id=question.parent_run_id,
            )
            await uow.commit()
        for event in queued.events:
            await self._bus.publish(event)
        return queued.run

    async def _text(self, run: Run) -> str:
        if run.status is RunStatus.REQUIRES_ACTION:
            return NEEDS_ANSWERS if _questions(run) else NEEDS_CLIENT
        if run.status is not RunStatus.COMPLETED:
            return run.error.message if run.error else f"the run ended {run.status.value}"
        async with self._uow.read_only() as uow:
            last = await uow.messages.last(run.org_id, run.thread_id)
        return last.text if last is not None else ""

    async def _stored(self, run: Run) -> Run:
        async with self._uow.read_only() as uow:
            return await uow.runs.get(run.org_id, run.id) or run

    async def _cancel_waiting(self, run: Run) -> None:
        async with self._uow as uow:
            stored = await uow.runs.get(run.org_id, run.id, for_update=True)
            if stored is None or stored.status is not RunStatus.REQUIRES_ACTION:
                return
            stored.cancel(self._clock.now())
            event = await store_ending(uow, stored, self._bus, self._clock)
            await uow.commit()
        await self._bus.publish(event)
