"""Queueing a run: on a thread the caller chose, or on a fresh thread (delegation, MCP publishing)."""

from application.ports.persistence import UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.request_context import current_request_id
from domain.agents import Agent
from domain.ids import MessageId, RunId, ThreadId
from domain.messages import MessageRole, TextContent
from domain.run_events import RunCreated, RunEvent
from domain.runs import ClientTool, Run
from domain.threads import THREAD_TITLE_MAX, Thread


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
) -> tuple[Run, RunEvent]:
    """Inside the caller's unit of work: append the input (if any) and queue a run. The caller commits
    and then publishes the returned run.created event."""
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
    if input is not None:
        message = thread.append(
            MessageRole.USER, (TextContent(text=input),), message_id=MessageId(ids.new()), now=now, run_id=run.id
        )
        await uow.threads.save(thread)
        await uow.messages.add(message)
    await uow.runs.add(run)
    event = RunEvent(run_id=run.id, seq=1, payload=RunCreated.of(run), created_at=now)
    await uow.run_events.add(event, run.org_id)
    return run, event


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
