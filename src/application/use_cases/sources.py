from application.caller import Caller
from application.errors import AgentNotFound, SourceNotFound, ThreadNotFound
from application.pagination import Page, PageRequest, decode_id_cursor, page_of
from application.ports.persistence import SourceSummary, UnitOfWork
from domain.ids import AgentId, SourceId, ThreadId
from domain.sources import Source


class ListSources:
    """The sources of a thread or of an agent, without their content."""

    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(
        self,
        caller: Caller,
        page: PageRequest,
        *,
        thread_id: ThreadId | None = None,
        agent_id: AgentId | None = None,
    ) -> Page[SourceSummary]:
        after = decode_id_cursor(page.cursor)
        async with self._uow.read_only() as uow:
            if thread_id is not None and await uow.threads.get(caller.org_id, thread_id) is None:
                raise ThreadNotFound(f"thread {thread_id} not found")
            if agent_id is not None and await uow.agents.get(caller.org_id, agent_id) is None:
                raise AgentNotFound(f"agent {agent_id} not found")
            rows = await uow.sources.list(
                caller.org_id,
                thread_id=thread_id,
                agent_id=agent_id,
                limit=page.limit + 1,
                after=SourceId(after) if after else None,
            )
        return page_of(rows, page.limit, key=lambda s: str(s.id))


class GetSource:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, source_id: SourceId) -> Source:
        async with self._uow.read_only() as uow:
            source = await uow.sources.get(caller.org_id, source_id)
        if source is None:
            raise SourceNotFound(f"source {source_id} not found")
        return source
