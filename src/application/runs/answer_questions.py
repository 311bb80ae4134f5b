"""The user's answers to the questions the servers of a run's MCP tool calls asked (elicitation)."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from application.caller import Caller
from application.errors import RunNotFound
from application.ports.execution import RunEventBus, RunExecutor
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock
from application.runs.events import RunEventStream
from domain.elicitation import ElicitationAction, ElicitationAnswer
from domain.ids import RunId
from domain.run_events import RunInProgress
from domain.runs import Run, RunStatus


@dataclass(frozen=True, kw_only=True)
class QuestionAnswer:
    question_id: str
    action: ElicitationAction
    content: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class AnswerQuestionsCommand:
    caller: Caller
    run_id: RunId
    answers: Sequence[QuestionAnswer] = field(default_factory=tuple)


class AnswerQuestions:
    """Answers to every question a run waits for, at once, each checked against its form. The run then goes on:
    its tool calls are made again with the answers (on any process, however much later), or, for questions asked
    while their calls are open, those calls take the answers (see application.runs.questions)."""

    def __init__(self, uow: UnitOfWork, clock: Clock, bus: RunEventBus, executor: RunExecutor | None) -> None:
        """Without an executor, the runs that go on are executed by the caller (AskAgent)."""
        self._uow, self._clock, self._bus, self._executor = uow, clock, bus, executor

    async def execute(self, command: AnswerQuestionsCommand) -> Run:
        org_id = command.caller.org_id
        async with self._uow as uow:
            run = await uow.runs.get(org_id, command.run_id, for_update=True)
            if run is None:
                raise RunNotFound(f"run {command.run_id} not found")
            answers = [(a.question_id, ElicitationAnswer(action=a.action, content=a.content)) for a in command.answers]
            run.answer_questions(answers, self._clock.now())
            # A question asked while its call is open is taken by that call, in the process that executes the run,
            # which numbers the run's events: it announces the run in progress again itself.
            resumed = run.status is RunStatus.IN_PROGRESS and not run.asks_live
            recorded = []
            if resumed:
                events = await RunEventStream.resume(uow, org_id, run.id, self._bus, self._clock)
                recorded = [await events.record(uow, RunInProgress.of(run))]
            # Resumed, it is this process's from now on (it goes on here, or from its job's worker, or, without an
            # executor, in the caller's task: AskAgent), not left to a process that may be gone.
            await uow.runs.save(run, hold=resumed)
            # In worker mode, its job is queued with the answers.
            submitted = resumed and self._executor is not None and await uow.run_jobs.add(org_id, run.id)
            await uow.commit()
        if recorded:
            await events.publish(*recorded)
        if resumed and self._executor is not None and not submitted:
            await self._executor.submit(org_id, run.id)
        return run
