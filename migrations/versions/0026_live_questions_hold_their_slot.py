"""Worker mode's admission counts a run whose open tool call waits for its user's answer among those that hold a slot.

Such a run (`requires_action`, a question asked during its call: handshake-era servers' `elicitation/create`) still
executes: its call waits in its worker and goes on with the answer. It keeps its slot (since the run's writes give a
slot back themselves, only a run that stops executing loses it: it ends, or waits for its client's tool results),
but the admission counted only queued and in-progress runs: while the question waited, another run of the
organization was let in, and once answered the run went on over the organization's limit. A run waiting for its
client holds no slot now (`admitted_at` is cleared by the write that stores it so), so the slots held are the runs
admitted and not ended. The index of the slots held and `threadline_admit_run`'s count change accordingly (the
downgrade restores them as 0024 left them), and a run waiting for its client that an earlier version left holding a
slot gives it back. Processes of an earlier version still running after this upgrade give such a slot back only
as the run's job ends (a release that fails leaves it counted until the run goes on): upgrade the workers with the
database. See infrastructure/limits/admission.py.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-29
"""

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HOLDING = "ix_runs_org_id_holding_slot"
HOLDING_BEFORE = "admitted_at IS NOT NULL AND status IN ('queued', 'in_progress')"
HOLDING_AFTER = "admitted_at IS NOT NULL AND status IN ('queued', 'in_progress', 'requires_action')"
COUNT_BEFORE = "WHERE org_id = p_org AND admitted_at IS NOT NULL AND status IN ('queued', 'in_progress')),"
COUNT_AFTER = (
    "WHERE org_id = p_org AND admitted_at IS NOT NULL AND status IN ('queued', 'in_progress', 'requires_action')),"
)


def _revision(name: str) -> ModuleType:
    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"threadline_migration_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _as_0024() -> str:
    """threadline_admit_run's definition as revision 0024 left it."""
    revision_0024 = _revision("0024_admission_lets_cancelled_runs_through.py")
    definition: str = revision_0024._changed(revision_0024._as_0021())
    if definition.count(COUNT_BEFORE) != 1:
        raise RuntimeError(f"threadline_admit_run as 0024 left it does not count the slots held with {COUNT_BEFORE!r}")
    return definition


def _reindex(predicate: str) -> None:
    op.drop_index(HOLDING, table_name="runs")
    where = sa.text(predicate)
    op.create_index(HOLDING, "runs", ["org_id"], postgresql_where=where, sqlite_where=where)


# A run that waits for its client (no question open in a call) gives its slot back now: one that an earlier version
# left holding it (its release failed) would count from now on.
GIVE_BACK = (
    "UPDATE runs SET admitted_at = NULL WHERE status = 'requires_action' AND admitted_at IS NOT NULL"
    " AND NOT awaiting_input @> '[{\"live\": true}]'::jsonb"
)


def upgrade() -> None:
    _reindex(HOLDING_AFTER)
    if op.get_bind().dialect.name == "postgresql":  # worker mode is PostgreSQL's only
        op.execute(_as_0024().replace(COUNT_BEFORE, COUNT_AFTER))
        op.execute(GIVE_BACK)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_as_0024())
    _reindex(HOLDING_BEFORE)
