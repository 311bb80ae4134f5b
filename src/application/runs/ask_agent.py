"""An agent answers one input in a thread of its own, as a real run: for delegation and MCP publishing."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from application.ports.execution import RunEventBus
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.runs.execute_run import ExecuteRun
from application.runs.start import new_thread, queue_run
from domain.agents import Agent
from domain.runs import Run, RunStatus

Progress = Callable[[float, str], Awaitable[None]]


@dataclass(frozen=True, kw_only=True)
class Answer:
    run: Run
    text: str

    @property
    def failed(self) -> bool:
        return self.run.status is not RunStatus.COMPLETED


class AskAgent:
    def __init__(self, uow: UnitOfWork, clock: Clock, ids: IdGenerator, bus: RunEventBus, runs: ExecuteRun) -> None:
        self._uow, self._clock, self._ids, self._bus, self._runs = uow, clock, ids, bus, runs

    async def execute(self, agent: Agent, input: str, *, title: str, progress: Progress | None = None) -> Answer:
        """Runs in the caller's task: cancelling it cancels the run."""
        async with self._uow as uow:
            thread = await new_thread(uow, clock=self._clock, ids=self._ids, agent=agent, title=title)
            queued, created = await queue_run(
                uow, clock=self._clock, ids=self._ids, thread=thread, agent=agent, input=input
            )
            await uow.commit()
        await self._bus.publish(created)
        if progress is not None:
            await progress(0.0, "Starting agent")
        finished = await self._runs.execute(agent.org_id, queued.id) or queued
        if finished.status is RunStatus.REQUIRES_ACTION:
            await self._runs.cancel_waiting(finished)
        if finished.status is RunStatus.COMPLETED:
            text = await self._runs.final_answer(finished)
        elif finished.status is RunStatus.REQUIRES_ACTION:
            text = "the agent needs tools that a client runs, which no one can run here"
        else:
            text = finished.error.message if finished.error else f"the run ended {finished.status.value}"
        if progress is not None:
            await progress(1.0, "Completed" if finished.status is RunStatus.COMPLETED else "Failed")
        return Answer(run=finished, text=text)
