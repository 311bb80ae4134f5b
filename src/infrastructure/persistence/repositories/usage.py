from collections.abc import Sequence
from datetime import UTC, date
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.dialects import postgresql, sqlite

from application.ports.persistence import UsageGrouping, UsageLine
from domain.ids import OrgId
from domain.runs import Run
from domain.usage import Usage
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.prepared import Prepared
from infrastructure.persistence.tables import usage_records

_INSERTS = {
    # A step in the ledger already is left as it is: after a COMMIT whose answer was lost, the run may count the
    # step out (see record_new_steps) although it was stored.
    "postgresql": Prepared(postgresql.insert(usage_records).on_conflict_do_nothing()),
    "sqlite": Prepared(sqlite.insert(usage_records).on_conflict_do_nothing()),
}
_KEYS = {
    UsageGrouping.DAY: usage_records.c.day,
    UsageGrouping.AGENT: usage_records.c.agent_id,
    UsageGrouping.MODEL: usage_records.c.model,
}
_SUMS = (
    func.coalesce(func.sum(usage_records.c.input_tokens), 0).label("input_tokens"),
    func.coalesce(func.sum(usage_records.c.output_tokens), 0).label("output_tokens"),
    func.coalesce(func.sum(usage_records.c.cached_tokens), 0).label("cached_tokens"),
    func.count().label("model_calls"),
    func.coalesce(func.sum(usage_records.c.tool_calls), 0).label("tool_calls"),
    func.count(usage_records.c.run_id.distinct()).label("runs"),
)
_IN_RANGE = (
    usage_records.c.org_id == bindparam("p_org"),
    usage_records.c.day >= bindparam("p_first"),
    usage_records.c.day <= bindparam("p_last"),
)


async def record_new_steps(connection: UnitConnection, run: Run) -> None:
    """Add the run's steps the ledger does not have yet: one statement, in the transaction storing them. Should
    that transaction not commit, the run counts them out of the ledger again (a later save adds them)."""
    recorded = run.steps_in_ledger
    new = run.steps[recorded:]
    if not new:
        return
    await connection.later(
        _INSERTS[connection.dialect.name],
        [
            {
                "run_id": run.id,
                "step": step.number,
                "org_id": run.org_id,
                "agent_id": run.agent_id,
                "model": step.model,
                "day": step.completed_at.astimezone(UTC).date(),
                "input_tokens": step.usage.input_tokens,
                "output_tokens": step.usage.output_tokens,
                "cached_tokens": step.usage.cached_tokens,
                "tool_calls": len(step.tool_calls),
            }
            for step in new
        ],
    )
    run.steps_in_ledger = len(run.steps)
    connection.unless_committed(lambda: setattr(run, "steps_in_ledger", recorded))


def _key(value: Any) -> str:
    return value.isoformat() if isinstance(value, date) else str(value)


class SqlUsageRepository:
    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def totals(
        self, org_id: OrgId, *, first_day: date, last_day: date, group_by: UsageGrouping | None
    ) -> Sequence[UsageLine]:
        params = {"p_org": org_id, "p_first": first_day, "p_last": last_day}
        if group_by is None:
            query = select(*_SUMS).where(*_IN_RANGE)
            rows = [(None, row) for row in await self._conn.execute(query, params)]
        else:
            key = _KEYS[group_by]
            query = select(key.label("key"), *_SUMS).where(*_IN_RANGE).group_by(key).order_by(key)
            rows = [(row.key, row) for row in await self._conn.execute(query, params)]
        return [
            UsageLine(
                key="" if key is None else _key(key),
                usage=Usage(
                    input_tokens=int(row.input_tokens),
                    output_tokens=int(row.output_tokens),
                    cached_tokens=int(row.cached_tokens),
                ),
                model_calls=int(row.model_calls),
                tool_calls=int(row.tool_calls),
                runs=int(row.runs),
            )
            for key, row in rows
        ]
