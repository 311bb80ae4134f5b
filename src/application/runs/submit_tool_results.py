"""The client's results for the tool calls a run waits for."""

from collections.abc import Sequence
from dataclasses import dataclass, field

from application.caller import Caller
from application.errors import RunNotFound, ThreadNotFound
from application.ports.execution import RunEventBus, RunExecutor
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.runs.events import RunEventStream
from domain.ids import MessageId, RunId
from domain.messages import MessageRole, ToolResultContent
from domain.run_events import RunEventPayload, RunInProgress, ToolCallCompleted
from domain.runs import Run, RunStatus


@dataclass(frozen=True, kw_only=True)
class ToolResultInput:
    tool_use_id: str
    result: str
    is_error: bool = False


@dataclass(frozen=True, kw_only=True)
class SubmitToolResultsCommand:
    caller: Caller
    run_id: RunId
    results: Sequence[ToolResultInput] = field(default_factory=tuple)


class SubmitToolResults:
    """The client's results for the calls a run waits for: all of them at once. The run then goes on, unless
    it waits for the user's answers to questions too."""

    def __init__(
        self, uow: UnitOfWork, clock: Clock, ids: IdGenerator, bus: RunEventBus, executor: RunExecutor
    ) -> None:
        self._uow, self._clock, self._ids, self._bus, self._executor = uow, clock, ids, bus, executor

    async def execute(self, command: SubmitToolResultsCommand) -> Run:
        org_id = command.caller.org_id
        async with self._uow as uow:
            run = await uow.runs.get(org_id, command.run_id, for_update=True)
            if run is None:
                raise RunNotFound(f"run {command.run_id} not found")
            now = self._clock.now()
            failed = {r.tool_use_id for r in command.results if r.is_error}
            waited = run.resume([r.tool_use_id for r in command.results], now, failed)
            thread = await uow.threads.get(org_id, run.thread_id, for_update=True)
            if thread is None:
                raise ThreadNotFound(f"thread {run.thread_id} not found")
            results = [(r, waited[r.tool_use_id].name) for r in command.results]
            content = tuple(
                ToolResultContent(tool_use_id=r.tool_use_id, tool_name=name, result=r.result, is_error=r.is_error)
                for r, name in results
            )
            message = thread.append(
                MessageRole.TOOL, content, message_id=MessageId(self._ids.new()), now=now, run_id=run.id
            )
            await uow.threads.save(thread)
            await uow.messages.add(message)
            events = await RunEventStream.resume(uow, org_id, run.id, self._bus, self._clock)
            payloads: list[RunEventPayload] = [
                ToolCallCompleted(tool_call_id=r.tool_use_id, name=name, is_error=r.is_error, result=r.result)
                for r, name in results
            ]
            going_on = run.status is RunStatus.IN_PROGRESS
            if going_on:
                payloads.append(RunInProgress.of(run))
            recorded = [await events.record(uow, p) for p in payloads]
            await uow.runs.save(run, hold=going_on)  # it goes on from this process (or its job's worker)
            submitted = going_on and await uow.run_jobs.add(org_id, run.id)  # worker mode: queued with the results
            await uow.commit()
        await events.publish(*recorded)
        if going_on and not submitted:
            await self._executor.submit(org_id, run.id)
        return run
