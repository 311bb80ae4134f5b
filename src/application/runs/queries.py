"""Reading runs: one, or a filtered page of them."""

from dataclasses import dataclass

from application.caller import Caller
from application.errors import (
    RunNotFound,
    ThreadNotFound,
)
from application.pagination import Page, PageRequest, decode_id_cursor, page_of
from application.ports.persistence import UnitOfWork
from domain.ids import AgentId, RunId, ThreadId
from domain.runs import Run, RunStatus


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
