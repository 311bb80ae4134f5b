"""Runs over the API: start one on a thread, follow it, cancel it, answer its client tool calls."""

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

from application.caller import Caller
from application.errors import (
    IdempotencyConflict,
    InvalidReference,
    RunNotFound,
    RunNotWaiting,
    ThreadBusy,
    ThreadNotFound,
)
from application.pagination import Page, PageRequest, decode_id_cursor, page_of
from application.ports.persistence import UnitOfWork
from application.ports.runs import RunEventBus, RunExecutor, RunSubscription
from application.ports.system import Clock, IdGenerator
from application.runs.events import RunEventStream
from application.runs.start import queue_run, run_summary
from domain.errors import IllegalTransition, InvalidValue
from domain.ids import AgentId, MessageId, RunId, ThreadId
from domain.messages import Message, MessageRole, ToolResultContent
from domain.runs import ClientTool, Run, RunErrorCode, RunEvent, RunEventType, RunStatus

CLIENT_TOOLS_MAX = 64
INPUT_MAX = 1_000_000
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True, kw_only=True)
class CreateRunCommand:
    caller: Caller
    thread_id: ThreadId
    agent_id: AgentId | None = None
    input: str | None = None
    client_tools: Sequence[ClientTool] = ()
    idempotency_key: str | None = None


@dataclass(frozen=True, kw_only=True)
class CreatedRun:
    run: Run
    created: bool
    """False when the idempotency key named a run that already existed."""


def check_client_tools(tools: Sequence[ClientTool]) -> tuple[ClientTool, ...]:
    if len(tools) > CLIENT_TOOLS_MAX:
        raise InvalidValue(f"a run takes at most {CLIENT_TOOLS_MAX} client tools")
    for tool in tools:
        if not _TOOL_NAME.match(tool.name):
            raise InvalidValue(f"client tool name {tool.name!r} must be 1-64 characters of [a-zA-Z0-9_-]")
        if tool.parameters.get("type", "object") != "object":
            raise InvalidValue(f"client tool {tool.name!r}: parameters must be a JSON Schema of type object")
    return tuple(tools)


class CreateRun:
    """Queues a run on a thread (appending the input as a user message) and hands it to the executor.
    The same idempotency key within an organization gives back the same run."""

    def __init__(
        self, uow: UnitOfWork, clock: Clock, ids: IdGenerator, bus: RunEventBus, executor: RunExecutor
    ) -> None:
        self._uow, self._clock, self._ids, self._bus, self._executor = uow, clock, ids, bus, executor

    async def execute(self, command: CreateRunCommand) -> CreatedRun:
        org_id = command.caller.org_id
        if command.input is not None and not (1 <= len(command.input) <= INPUT_MAX):
            raise InvalidValue(f"input must be 1-{INPUT_MAX} characters")
        client_tools = check_client_tools(command.client_tools)
        if command.idempotency_key is not None:
            async with self._uow.read_only() as uow:
                existing = await uow.runs.find_by_idempotency_key(org_id, command.idempotency_key)
            if existing is not None:
                return CreatedRun(run=existing, created=False)
        try:
            async with self._uow as uow:
                thread = await uow.threads.get(org_id, command.thread_id, for_update=True)
                if thread is None:
                    raise ThreadNotFound(f"thread {command.thread_id} not found")
                agent_id = command.agent_id or thread.agent_id
                if agent_id is None:
                    raise InvalidReference("the thread has no agent: give agent_id")
                agent = await uow.agents.get(org_id, agent_id)
                if agent is None:
                    raise InvalidReference(f"agent {agent_id} not found")
                active = await uow.runs.active_in_thread(org_id, thread.id)
                if active is not None:
                    raise ThreadBusy(f"the thread already has a {active.status.value} run ({active.id})")
                run, created = await queue_run(
                    uow,
                    clock=self._clock,
                    ids=self._ids,
                    thread=thread,
                    agent=agent,
                    input=command.input,
                    client_tools=client_tools,
                    idempotency_key=command.idempotency_key,
                )
                await uow.commit()
        except IdempotencyConflict:
            # Another request with the same key won the race: answer with its run.
            async with self._uow.read_only() as uow:
                winner = await uow.runs.find_by_idempotency_key(org_id, command.idempotency_key or "")
            if winner is None:
                raise
            return CreatedRun(run=winner, created=False)
        await self._bus.publish(created)
        await self._executor.submit(org_id, run.id)
        return CreatedRun(run=run, created=True)


class GetRun:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, run_id: RunId) -> Run:
        async with self._uow.read_only() as uow:
            run = await uow.runs.get(caller.org_id, run_id)
        if run is None:
            raise RunNotFound(f"run {run_id} not found")
        return run


@dataclass(frozen=True, kw_only=True)
class RunFilter:
    thread_id: ThreadId | None = None
    agent_id: AgentId | None = None
    status: RunStatus | None = None


class ListRuns:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, page: PageRequest, filters: RunFilter = RunFilter()) -> Page[Run]:
        after = decode_id_cursor(page.cursor)
        async with self._uow.read_only() as uow:
            if filters.thread_id is not None and await uow.threads.get(caller.org_id, filters.thread_id) is None:
                raise ThreadNotFound(f"thread {filters.thread_id} not found")
            rows = await uow.runs.list(
                caller.org_id,
                limit=page.limit + 1,
                after=RunId(after) if after else None,
                thread_id=filters.thread_id,
                agent_id=filters.agent_id,
                status=filters.status,
            )
        return page_of(rows, page.limit, key=lambda r: str(r.id))


class CancelRun:
    """Cancels a run: one that waits is cancelled at once; one that executes stops its model or tool
    call promptly (here, or on the worker that runs it, at its next step)."""

    def __init__(self, uow: UnitOfWork, clock: Clock, bus: RunEventBus, executor: RunExecutor) -> None:
        self._uow, self._clock, self._bus, self._executor = uow, clock, bus, executor

    async def execute(self, caller: Caller, run_id: RunId) -> Run:
        published: RunEvent | None = None
        async with self._uow as uow:
            run = await uow.runs.get(caller.org_id, run_id, for_update=True)
            if run is None:
                raise RunNotFound(f"run {run_id} not found")
            if run.status.is_terminal:
                raise IllegalTransition(f"the run is already {run.status.value}")
            now = self._clock.now()
            if run.status in (RunStatus.QUEUED, RunStatus.REQUIRES_ACTION):
                run.cancel(now)
                events = await RunEventStream.resume(uow, caller.org_id, run_id, self._bus, self._clock)
                published = await events.record(uow, RunEventType.CANCELLED, run_summary(run))
            else:
                run.request_cancel(now)
                await uow.runs.request_cancel(caller.org_id, run_id)
            await uow.runs.save(run)
            await uow.commit()
        if published is not None:
            await self._bus.publish(published)
        if await self._executor.cancel(run_id):
            async with self._uow.read_only() as uow:
                return await uow.runs.get(caller.org_id, run_id) or run
        return run


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


class ListRunEvents:
    """What happened in a run so far (text deltas excepted: the messages hold the text)."""

    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, run_id: RunId, after_seq: int = 0) -> tuple[Run, Sequence[RunEvent]]:
        async with self._uow.read_only() as uow:
            run = await uow.runs.get(caller.org_id, run_id)
            if run is None:
                raise RunNotFound(f"run {run_id} not found")
            return run, await uow.run_events.list(caller.org_id, run_id, after_seq=after_seq)


@dataclass
class RunFollower:
    history: list[RunEvent]
    subscription: RunSubscription
    settled: bool
    """True when the run had ended (or was waiting) as the follower arrived: the history is all there is."""

    async def events(self, heartbeat: float) -> AsyncIterator[RunEvent | None]:
        """The history, then live events (None after `heartbeat` seconds of silence) until one ends it."""
        last = 0
        for event in self.history:
            last = max(last, event.seq)
            yield event
        if self.settled:
            return
        while True:
            try:
                event = await asyncio.wait_for(self.subscription.next(), heartbeat)
            except TimeoutError:
                yield None
                continue
            if event.seq <= last:
                continue
            last = event.seq
            yield event
            if event.type.ends_stream:
                return


class FollowRun:
    """A run's events for a follower: what happened so far (from the bus's backlog where it still has
    it, text deltas included, else from storage), then what happens live, until the run ends or
    waits for the client."""

    def __init__(self, uow: UnitOfWork, bus: RunEventBus) -> None:
        self._uow, self._bus = uow, bus

    async def execute(
        self, caller: Caller, run_id: RunId, after_seq: int = 0
    ) -> AbstractAsyncContextManager[RunFollower]:
        """Subscribes before reading what is stored, so nothing falls between the two."""
        stack = AsyncExitStack()
        subscription = await stack.enter_async_context(self._bus.subscribe(run_id))
        try:
            async with self._uow.read_only() as uow:
                run = await uow.runs.get(caller.org_id, run_id)
                stored = await uow.run_events.list(caller.org_id, run_id, after_seq=after_seq) if run else []
            if run is None:
                raise RunNotFound(f"run {run_id} not found")
        except BaseException:
            await stack.aclose()
            raise
        first_held = subscription.backlog[0].seq if subscription.backlog else None
        history = [e for e in stored if first_held is None or e.seq < first_held]
        history += [e for e in subscription.backlog if e.seq > after_seq]
        settled = run.status.is_terminal or run.status is RunStatus.REQUIRES_ACTION
        return _holding(RunFollower(history=history, subscription=subscription, settled=settled), stack)


@asynccontextmanager
async def _holding(follower: RunFollower, stack: AsyncExitStack) -> AsyncIterator[RunFollower]:
    async with stack:
        yield follower


class RecoverRuns:
    """At start: runs left in progress by a process that stopped are failed as interrupted; queued
    runs are handed to the executor again."""

    def __init__(self, uow: UnitOfWork, clock: Clock, bus: RunEventBus, executor: RunExecutor) -> None:
        self._uow, self._clock, self._bus, self._executor = uow, clock, bus, executor

    async def execute(self, batch: int = 500) -> tuple[int, int]:
        async with self._uow.read_only() as uow:
            unfinished = await uow.runs.unfinished(batch)
        interrupted = resubmitted = 0
        for run in unfinished:
            if run.status is RunStatus.QUEUED:
                await self._executor.submit(run.org_id, run.id)
                resubmitted += 1
                continue
            async with self._uow as uow:
                current = await uow.runs.get(run.org_id, run.id, for_update=True)
                if current is None or current.status is not RunStatus.IN_PROGRESS:
                    continue
                current.fail(
                    RunErrorCode.INTERRUPTED,
                    "the server stopped while the run was executing",
                    self._clock.now(),
                )
                events = await RunEventStream.resume(uow, run.org_id, run.id, self._bus, self._clock)
                event = await events.record(
                    uow,
                    RunEventType.FAILED,
                    {
                        **run_summary(current),
                        "error": {
                            "code": RunErrorCode.INTERRUPTED.value,
                            "message": current.error.message if current.error else "",
                        },
                    },
                )
                await uow.runs.save(current)
                await uow.commit()
            await self._bus.publish(event)
            interrupted += 1
        return interrupted, resubmitted
