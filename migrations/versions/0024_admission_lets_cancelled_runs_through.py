"""Worker mode's admission lets a run whose cancel is requested through without a slot, and counts the runs that go
on after their client's answers among those waiting for one.

A run that goes on after its client's tool results or answers is in progress, and waits for a slot like a queued
run. `threadline_admit_run` (migration 0019, its lock changed by 0021) counted only queued runs as waiting: such a
run was neither woken when a slot was given back (it looked again only every 30 s) nor counted ahead of the queued
runs behind it. And a cancel of such a run could not end it: its job waited in the queue until a slot was free.
Now the run whose cancel is requested is admitted at once, without taking a slot (it executes only to record that
end), and a waiting run is one queued or in progress, not admitted, its cancel not requested. The index of the
waiting runs (migration 0023) holds the runs in progress not admitted too. See infrastructure/limits/admission.py.

The function is redefined from 0019's definition, as 0021 left it, with the changes below (the downgrade defines it
as 0021 left it).

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-29
"""

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WAITING = "ix_runs_org_id_created_at_id_waiting_for_slot"
WAITING_BEFORE = "status = 'queued' AND admitted_at IS NULL"
WAITING_AFTER = "status IN ('queued', 'in_progress') AND admitted_at IS NULL"

_WAITING_RUNS = "WHERE r.org_id = p_org AND r.status = 'queued' AND r.admitted_at IS NULL"
CHANGES = (
    ("v_request_id varchar;", "v_request_id varchar;\n    v_cancel_requested boolean;"),
    (
        "SELECT o.max_concurrent_runs, r.status, r.admitted_at, r.request_id\n"
        "        INTO v_limit, v_status, v_admitted_at, v_request_id",
        "SELECT o.max_concurrent_runs, r.status, r.admitted_at, r.request_id, r.cancel_requested\n"
        "        INTO v_limit, v_status, v_admitted_at, v_request_id, v_cancel_requested",
    ),
    (
        "    IF v_admitted_at IS NOT NULL THEN",
        "    -- Holding its slot already; or its cancel is requested: it executes only to record that end.\n"
        "    IF v_admitted_at IS NOT NULL OR v_cancel_requested THEN",
    ),
    (
        _WAITING_RUNS,
        "WHERE r.org_id = p_org AND r.status IN ('queued', 'in_progress') AND r.admitted_at IS NULL"
        " AND NOT r.cancel_requested",
    ),
)
"""(as 0021 left it, as this revision leaves it): the waiting runs' predicate appears twice (counted, then woken)."""


def _as_0021() -> str:
    path = Path(__file__).with_name("0019_run_admission_function.py")
    spec = importlib.util.spec_from_file_location("threadline_migration_0019", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    definition: str = module.ADMIT_RUN
    return definition.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION").replace(
        "FOR UPDATE OF o", "FOR NO KEY UPDATE OF o"
    )


def _changed(definition: str) -> str:
    for old, new in CHANGES:
        if old not in definition:
            raise RuntimeError(f"threadline_admit_run as 0021 left it has no {old!r}")
        definition = definition.replace(old, new)
    return definition


def _reindex(predicate: str) -> None:
    op.drop_index(WAITING, table_name="runs")
    where = sa.text(predicate)
    op.create_index(WAITING, "runs", ["org_id", "created_at", "id"], postgresql_where=where, sqlite_where=where)


def upgrade() -> None:
    _reindex(WAITING_AFTER)
    if op.get_bind().dialect.name == "postgresql":  # worker mode is PostgreSQL's only
        op.execute(_changed(_as_0021()))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_as_0021())
    _reindex(WAITING_BEFORE)
