"""An agent answers one input in a thread of its own, as a real run: a sub-agent's task in a run, or a call
of a published agent over MCP."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from application.ports.execution import RunEventBus
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.runs.events import store_ending
from application.runs.execute_run import RunExecution
from application.runs.queueing import new_thread, queue_run
from domain.agents import Agent
from domain.ids import RunId
from domain.runs import Run, RunStatus

Progress = Callable[[float, str], Awaitable[None]]
NEEDS_CLIENT = "the agent needs tools that a client runs, which no one can run here"


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


@dataclass(frozen=True, kw_only=True)
class Answer:
    run: Run
    text: str
    """The agent's answer; when the run did not complete, why."""

    @property
    def failed(self) -> bool:
        return self.run.status is not RunStatus.COMPLETED


class AskAgent:
    """The run executes in the caller's task: cancelling the caller cancels the run. A run that waits for
    client tools is cancelled, since no client is there to run them."""

    def __init__(
        self, uow: UnitOfWork, clock: Clock, ids: IdGenerator, bus: RunEventBus, runs: Callable[[], RunExecution]
    ) -> None:
        self._uow, self._clock, self._ids, self._bus, self._runs = uow, clock, ids, bus, runs

    async def execute(self, question: Question) -> Answer:
        queued = await self._queue(question)
        if question.progress is not None:
            await question.progress(0.0, "Starting agent")
        run = await self._runs().execute(queued.org_id, queued.id, depth=question.depth)
        answer = Answer(run=run, text=await self._text(run))
        if run.status is RunStatus.REQUIRES_ACTION:
            await self._cancel_waiting(run)
        if question.progress is not None:
            await question.progress(1.0, "Failed" if answer.failed else "Completed")
        return answer

    async def _queue(self, question: Question) -> Run:
        async with self._uow as uow:
            thread = await new_thread(uow, clock=self._clock, ids=self._ids, agent=question.agent, title=question.title)
            run, created = await queue_run(
                uow,
                clock=self._clock,
                ids=self._ids,
                thread=thread,
                agent=question.agent,
                input=question.input,
                parent_run_id=question.parent_run_id,
            )
            await uow.commit()
        await self._bus.publish(created)
        return run

    async def _text(self, run: Run) -> str:
        if run.status is RunStatus.REQUIRES_ACTION:
            return NEEDS_CLIENT
        if run.status is not RunStatus.COMPLETED:
            return run.error.message if run.error else f"the run ended {run.status.value}"
        async with self._uow.read_only() as uow:
            last = await uow.messages.last(run.org_id, run.thread_id)
        return last.text if last is not None else ""

    async def _cancel_waiting(self, run: Run) -> None:
        async with self._uow as uow:
            stored = await uow.runs.get(run.org_id, run.id, for_update=True)
            if stored is None or stored.status is not RunStatus.REQUIRES_ACTION:
                return
            stored.cancel(self._clock.now())
            event = await store_ending(uow, stored, self._bus, self._clock)
            await uow.commit()
        await self._bus.publish(event)
