from collections.abc import Mapping
from dataclasses import dataclass, field

from application.caller import Caller
from application.errors import InvalidReference, ThreadBusy, ThreadNotFound
from application.pagination import Page, PageRequest, decode_id_cursor, decode_position_cursor, page_of
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock, IdGenerator
from domain.ids import AgentId, MessageId, ThreadId
from domain.messages import ContentPart, Message, MessageRole
from domain.threads import Thread


@dataclass(frozen=True, kw_only=True)
class CreateThreadCommand:
    caller: Caller
    agent_id: AgentId | None = None
    title: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)


class CreateThread:
    def __init__(self, uow: UnitOfWork, clock: Clock, ids: IdGenerator) -> None:
        self._uow, self._clock, self._ids = uow, clock, ids

    async def execute(self, command: CreateThreadCommand) -> Thread:
        now = self._clock.now()
        thread = Thread(
            id=ThreadId(self._ids.new()),
            org_id=command.caller.org_id,
            agent_id=command.agent_id,
            title=command.title,
            metadata=dict(command.metadata),
            created_at=now,
            updated_at=now,
        )
        async with self._uow as uow:
            if command.agent_id is not None and await uow.agents.get(command.caller.org_id, command.agent_id) is None:
                raise InvalidReference(f"agent {command.agent_id} not found")
            await uow.threads.add(thread)
            await uow.commit()
        return thread


class GetThread:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, thread_id: ThreadId) -> Thread:
        async with self._uow.read_only() as uow:
            thread = await uow.threads.get(caller.org_id, thread_id)
        if thread is None:
            raise ThreadNotFound(f"thread {thread_id} not found")
        return thread


class ListThreads:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, page: PageRequest, agent_id: AgentId | None = None) -> Page[Thread]:
        after = decode_id_cursor(page.cursor)
        async with self._uow.read_only() as uow:
            rows = await uow.threads.list(
                caller.org_id,
                limit=page.limit + 1,
                after=ThreadId(after) if after else None,
                agent_id=agent_id,
            )
        return page_of(rows, page.limit, key=lambda t: str(t.id))


async def _not_busy(uow: UnitOfWork, caller: Caller, thread_id: ThreadId, advice: str) -> None:
    active = await uow.runs.active_in_thread(caller.org_id, thread_id)
    if active is not None:
        raise ThreadBusy(f"the thread has a {active.status.value} run ({active.id}); {advice}")


class DeleteThread:
    """Deletes a thread with its messages."""

    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, thread_id: ThreadId) -> None:
        async with self._uow as uow:
            # Locked, so no run is queued meanwhile; a run still going would write into a thread that is gone.
            if await uow.threads.get(caller.org_id, thread_id, for_update=True) is None:
                raise ThreadNotFound(f"thread {thread_id} not found")
            await _not_busy(uow, caller, thread_id, "cancel it before deleting the thread")
            await uow.threads.delete(caller.org_id, thread_id)
            await uow.commit()


@dataclass(frozen=True, kw_only=True)
class AppendUserMessageCommand:
    caller: Caller
    thread_id: ThreadId
    content: tuple[ContentPart, ...]


class AppendUserMessage:
    def __init__(self, uow: UnitOfWork, clock: Clock, ids: IdGenerator) -> None:
        self._uow, self._clock, self._ids = uow, clock, ids

    async def execute(self, command: AppendUserMessageCommand) -> Message:
        async with self._uow as uow:
            thread = await uow.threads.get(command.caller.org_id, command.thread_id, for_update=True)
            if thread is None:
                raise ThreadNotFound(f"thread {command.thread_id} not found")
            # A message between a run's tool calls and their results would break the order models require.
            await _not_busy(uow, command.caller, thread.id, "wait for it to end (or cancel it)")
            message = thread.append(
                MessageRole.USER, command.content, message_id=MessageId(self._ids.new()), now=self._clock.now()
            )
            await uow.threads.save(thread)
            await uow.messages.add(message)
            await uow.commit()
        return message


class ListMessages:
    """A thread's messages in the order they were appended."""

    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, thread_id: ThreadId, page: PageRequest) -> Page[Message]:
        after_position = decode_position_cursor(page.cursor)
        async with self._uow.read_only() as uow:
            if await uow.threads.get(caller.org_id, thread_id) is None:
                raise ThreadNotFound(f"thread {thread_id} not found")
            rows = await uow.messages.list(
                caller.org_id, thread_id, limit=page.limit + 1, after_position=after_position
            )
        return page_of(rows, page.limit, key=lambda m: str(m.position))
