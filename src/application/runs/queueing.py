"""Queueing a run: on a thread the caller chose, or on a fresh thread (delegation, MCP publishing)."""

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from application.ports.execution import RunEventBus
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.request_context import current_request_id
from application.runs.recorder import Began, begin_new
from domain.agents import Agent
from domain.ids import MessageId, RunId, ThreadId
from domain.messages import Message, MessageRole, TextContent
from domain.run_events import RunCreated, RunEvent
from domain.runs import ClientTool, Run
from domain.threads import THREAD_TITLE_MAX, Thread


@dataclass(frozen=True, kw_only=True)
class StartAtOnce:
    """A run this process executes at once (queue_run's `start_on`; the caller holds a slot for it)."""

    bus: RunEventBus
    """Where its events are published."""
    start: Callable[[RunId, Began], None]
    """Starts its execution: called inside the unit of work that creates it, before the commit."""
    creation: "asyncio.Future[None]"
    """Done once that unit has committed and its events are published; failed with RunNotCreated when it did not
    commit (see Began.created)."""


@dataclass(frozen=True, kw_only=True)
class Queued:
    run: Run
    events: tuple[RunEvent, ...]
    """run.created, and run.in_progress for a run started at once: to publish after commit, in order."""
    submitted: bool = False
    """The run's job was queued with the unit's writes (see `to_executor`): it is not to be submitted again."""


async def queue_run(
    uow: UnitOfWork,
    *,
    clock: Clock,
    ids: IdGenerator,
    thread: Thread,
    agent: Agent,
    input: str | None,
    client_tools: tuple[ClientTool, ...] = (),
    idempotency_key: str | None = None,
    request_digest: str | None = None,
    parent_run_id: RunId | None = None,
    instructions: str | None = None,
    start_on: StartAtOnce | None = None,
    appended: Sequence[Message] = (),
    to_executor: bool = False,
) -> Queued:
    """Inside the caller's unit of work: append the input (if any) and queue a run. The caller commits
    and then publishes the returned events. `start_on`: the run executes in this process at once, stored started
    as its execution would start it in a transaction of its own (see RunRecorder.begin); its execution is started
    here, from what this unit read, before the caller commits: its first model call goes out while the commit does
    (see Began.created).
    `appended`: the messages the caller appended to the thread in this unit of work, oldest first (a run on a
    thread that holds only those, and its input, does not read them back). `to_executor`: a run not started at once
    is for the executor (the caller submits it after the commit); where runs execute from a job queue, its job is
    queued with the unit's writes instead, so that no run is stored queued without one."""
    now = clock.now()
    run = Run(
        id=RunId(ids.new()),
        org_id=thread.org_id,
        thread_id=thread.id,
        agent_id=agent.id,
        client_tools=client_tools,
        idempotency_key=idempotency_key,
        request_digest=request_digest,
        parent_run_id=parent_run_id,
        instructions=instructions,
        request_id=current_request_id.get(),
        created_at=now,
        updated_at=now,
    )
    created = RunEvent(run_id=run.id, seq=1, payload=RunCreated.of(run), created_at=now)
    new_messages = list(appended)
    if input is not None:
        message = thread.append(
            MessageRole.USER, (TextContent(text=input),), message_id=MessageId(ids.new()), now=now, run_id=run.id
        )
        await uow.threads.save(thread)
        await uow.messages.add(message)
        new_messages.append(message)
    if start_on is None:
        await uow.runs.add(run)
        await uow.run_events.add(created, run.org_id)
        submitted = to_executor and await uow.run_jobs.add(run.org_id, run.id)
        return Queued(run=run, events=(created,), submitted=submitted)
    history = new_messages if len(new_messages) == thread.message_count else None  # else older ones are read
    began, started = await begin_new(
        uow,
        run,
        created,
        agent,
        start_on.bus,
        clock,
        thread_messages=thread.message_count,
        history=history,
        creation=start_on.creation,
    )
    start_on.start(run.id, began)
    return Queued(run=run, events=(created, started))


async def new_thread(uow: UnitOfWork, *, clock: Clock, ids: IdGenerator, agent: Agent, title: str) -> Thread:
    now = clock.now()
    thread = Thread(
        id=ThreadId(ids.new()),
        org_id=agent.org_id,
        agent_id=agent.id,
        title=title[:THREAD_TITLE_MAX],
        created_at=now,
        updated_at=now,
    )
    await uow.threads.add(thread)
    return thread
