"""An organization's limits: its own (`threadline orgs set-limits`) or, where it has none, the deployment's."""

import time

from sqlalchemy import select

from domain.ids import OrgId
from domain.organizations import RunLimits, effective_limits
from infrastructure.persistence.engine import Database
from infrastructure.persistence.tables import organizations


class OrgLimits:
    """Reads an organization's limits, at most once per `ttl_seconds` (a change reaches every process within it)."""

    def __init__(
        self, database: Database, *, max_concurrent_runs: int, runs_per_minute: int | None, ttl_seconds: float = 5.0
    ) -> None:
        self._database, self._ttl = database, ttl_seconds
        self.default = RunLimits(max_concurrent_runs=max_concurrent_runs, runs_per_minute=runs_per_minute)
        self._known: dict[OrgId, tuple[float, RunLimits]] = {}

    async def of(self, org_id: OrgId) -> RunLimits:
        now = time.monotonic()
        known = self._known.get(org_id)
        if known is not None and now - known[0] < self._ttl:
            return known[1]
        query = select(organizations.c.max_concurrent_runs, organizations.c.runs_per_minute).where(
            organizations.c.id == org_id
        )
        async with self._database.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        limits = self.default
        if row is not None:
            limits = effective_limits(row.max_concurrent_runs, row.runs_per_minute, self.default)
        if len(self._known) > 10_000:
            self._known.clear()
        self._known[org_id] = (now, limits)
        return limits
