"""Fair share in worker mode: a worker executes a run only while fewer of its organization's runs than the
organization's limit hold a slot, counted in the database so the limit holds for the whole deployment.

A run holds a slot from its admission (`runs.admitted_at`) until it stops executing: it ends, or waits for
its client's tool results (the slot is given back then, and taken again when it resumes). Admissions of one
organization are serialized by a lock on its row, so two workers never both take the last slot. A run handed
back or taken over after a lost worker keeps its slot.
"""

from dataclasses import dataclass

from sqlalchemy import text

from domain.ids import OrgId, RunId
from infrastructure.persistence.engine import Database

_LIMIT = text("SELECT max_concurrent_runs FROM organizations WHERE id = :org FOR UPDATE")
_RUN = text("SELECT status, admitted_at, request_id FROM runs WHERE id = :run AND org_id = :org")
_HOLDING = text(
    "SELECT count(*) FROM runs WHERE org_id = :org AND admitted_at IS NOT NULL AND status IN ('queued', 'in_progress')"
)
_ADMIT = text("UPDATE runs SET admitted_at = now() WHERE id = :run")
_RELEASE = text("UPDATE runs SET admitted_at = NULL WHERE id = :run AND status NOT IN ('queued', 'in_progress')")


@dataclass(frozen=True, kw_only=True)
class Admission:
    admitted: bool
    request_id: str | None = None
    """The id of the request that created the run (for its log lines and trace)."""


class RunAdmission:
    def __init__(self, database: Database, *, default_limit: int) -> None:
        self._database, self._default = database, default_limit

    async def admit(self, org_id: OrgId, run_id: RunId) -> Admission:
        params = {"org": org_id, "run": run_id}
        async with self._database.engine.begin() as conn:
            own = (await conn.execute(_LIMIT, params)).first()
            run = (await conn.execute(_RUN, params)).first()
            if own is None or run is None or run.status not in ("queued", "in_progress"):
                return Admission(admitted=True)  # nothing to execute: the run's execution says so
            if run.admitted_at is not None:
                return Admission(admitted=True, request_id=run.request_id)
            holding = (await conn.execute(_HOLDING, params)).scalar_one()
            if holding >= (own.max_concurrent_runs or self._default):
                return Admission(admitted=False)
            await conn.execute(_ADMIT, params)
        return Admission(admitted=True, request_id=run.request_id)

    async def release(self, run_id: RunId) -> None:
        """Give the run's slot back unless it still executes (it ended, or waits for its client)."""
        async with self._database.engine.begin() as conn:
            await conn.execute(_RELEASE, {"run": run_id})
