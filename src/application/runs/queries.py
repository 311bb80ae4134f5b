"""Reading runs: one, or a filtered page of them."""

from dataclasses import dataclass
from datetime import UTC, datetime

from application.caller import Caller
from application.errors import (
    RunNotFound,
    ThreadNotFound,
)
from application.pagination import Page, PageRequest, decode_id_cursor, page_of
from application.ports.persistence import UnitOfWork
from domain.errors import InvalidValue
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
    created_after: datetime | None = None
    """Runs created at or after this instant (a time without an offset is UTC)."""
    created_before: datetime | None = None
    """Runs created before this instant (a time without an offset is UTC)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "created_after", _utc(self.created_after))
        object.__setattr__(self, "created_before", _utc(self.created_before))
        if self.created_after and self.created_before and self.created_after >= self.created_before:
            raise InvalidValue("created_before must be later than created_after")


def _utc(moment: datetime | None) -> datetime | None:
    # Stored times are UTC; SQLite compares them as text, so the bounds are brought to UTC too.
    if moment is None:
        return None
    try:
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+11:00, before the first day a time can hold in UTC
        raise InvalidValue(f"{moment.isoformat()} is outside the range of times") from None


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
                created_after=filters.created_after,
                created_before=filters.created_before,
            )
        return page_of(rows, page.limit, key=lambda r: str(r.id))
