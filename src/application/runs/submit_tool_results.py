"""The client's results for the tool calls a run waits for."""

from collections.abc import Sequence
from dataclasses import dataclass, field

from application.caller import Caller
from application.errors import (
    RunNotFound,
    RunNotWaiting,
    ThreadNotFound,
)
from application.ports.execution import RunEventBus, RunExecutor
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.runs.events import RunEventStream
from application.runs.start import run_summary
from domain.ids import MessageId, RunId
from domain.messages import Message, MessageRole, ToolResultContent
from domain.runs import Run, RunEventType, RunStatus


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
    """The client's results for the calls a run waits for: all of them at once. The run then goes on."""

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
            if run.status is not RunStatus.REQUIRES_ACTION:
                raise RunNotWaiting(f"the run is {run.status.value}, not waiting for tool results")
            waiting = {call.id: call for call in run.required_action}
            given = [r.tool_use_id for r in command.results]
            if len(set(given)) != len(given):
                raise RunNotWaiting("each tool call may be answered only once")
            if set(given) != set(waiting):
                unknown = sorted(set(given) - set(waiting))
                missing = sorted(set(waiting) - set(given))
                detail = []
                if unknown:
                    detail.append(f"the run did not make these calls: {', '.join(unknown)}")
                if missing:
                    detail.append(f"results are missing for: {', '.join(missing)}")
                raise RunNotWaiting("; ".join(detail))
            thread = await uow.threads.get(org_id, run.thread_id, for_update=True)
            if thread is None:
                raise ThreadNotFound(f"thread {run.thread_id} not found")
            now = self._clock.now()
            content = tuple(
                ToolResultContent(
                    tool_use_id=r.tool_use_id,
                    tool_name=waiting[r.tool_use_id].name,
                    result=r.result,
                    is_error=r.is_error,
                )
                for r in command.results
            )
            message = Message(
                id=MessageId(self._ids.new()),
                org_id=org_id,
                thread_id=thread.id,
                run_id=run.id,
                role=MessageRole.TOOL,
                content=content,
                position=thread.next_position(now),
                created_at=now,
            )
            await uow.threads.save(thread)
            await uow.messages.add(message)
            run.resume(now)
            events = await RunEventStream.resume(uow, org_id, run.id, self._bus, self._clock)
            completed = [
                await events.record(
                    uow,
                    RunEventType.TOOL_CALL_COMPLETED,
                    {
                        "tool_call_id": r.tool_use_id,
                        "name": waiting[r.tool_use_id].name,
                        "is_error": r.is_error,
                        "result": r.result,
                    },
                )
                for r in command.results
            ]
            resumed = await events.record(uow, RunEventType.IN_PROGRESS, run_summary(run))
            await uow.runs.save(run)
            await uow.commit()
        await events.publish(*completed, resumed)
        await self._executor.submit(org_id, run.id)
        return run
