"""How many tokens and tool calls an organization used, by day, agent or model (admins only)."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from application.caller import Caller
from application.ports.persistence import UnitOfWork, UsageGrouping, UsageLine
from application.ports.system import Clock
from domain.errors import InvalidValue

DEFAULT_DAYS = 30
MAX_DAYS = 366


@dataclass(frozen=True, kw_only=True)
class UsageQuery:
    caller: Caller
    first_day: date | None = None
    """Defaults to DEFAULT_DAYS days before last_day."""
    last_day: date | None = None
    """Included; defaults to today (UTC)."""
    group_by: UsageGrouping = UsageGrouping.DAY


@dataclass(frozen=True, kw_only=True)
class UsageReport:
    first_day: date
    last_day: date
    group_by: UsageGrouping
    groups: Sequence[UsageLine]
    totals: UsageLine


class GetUsage:
    def __init__(self, uow: UnitOfWork, clock: Clock) -> None:
        self._uow, self._clock = uow, clock

    async def execute(self, query: UsageQuery) -> UsageReport:
        query.caller.require_admin("see the organization's usage")
        last = query.last_day or self._clock.now().date()
        first = query.first_day or last - timedelta(days=DEFAULT_DAYS - 1)
        if first > last:
            raise InvalidValue("from must be on or before to")
        if (last - first).days >= MAX_DAYS:
            raise InvalidValue(f"a usage report covers at most {MAX_DAYS} days")
        org_id = query.caller.org_id
        async with self._uow.read_only() as uow:
            groups = await uow.usage.totals(org_id, first_day=first, last_day=last, group_by=query.group_by)
            (totals,) = await uow.usage.totals(org_id, first_day=first, last_day=last, group_by=None)
        return UsageReport(first_day=first, last_day=last, group_by=query.group_by, groups=groups, totals=totals)
