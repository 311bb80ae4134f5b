"""Worker mode's admission reads only the runs that hold or wait for a slot, not all of an organization's runs.

Each admission (`threadline_admit_run`, migration 0019) counts the organization's runs that hold a slot and those
that wait ahead of the run; a run's end and a refused run's wake read them too (infrastructure/limits/admission.py).
The planner found them through the index on the organization's runs (or the one on their status, all
organizations'), and read every run the organization ever had to keep a few: 0.8 ms an admission with 2,400 runs
behind it, growing with the organization's history. Two partial indexes hold only those runs: the ones holding a
slot, by organization, and the ones waiting, by organization and age (the order in which they are woken).

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HOLDING_SLOT = "admitted_at IS NOT NULL AND status IN ('queued', 'in_progress')"
WAITING_FOR_SLOT = "status = 'queued' AND admitted_at IS NULL"
HOLDING = "ix_runs_org_id_holding_slot"
WAITING = "ix_runs_org_id_created_at_id_waiting_for_slot"


def upgrade() -> None:
    holding, waiting = sa.text(HOLDING_SLOT), sa.text(WAITING_FOR_SLOT)
    op.create_index(HOLDING, "runs", ["org_id"], postgresql_where=holding, sqlite_where=holding)
    op.create_index(WAITING, "runs", ["org_id", "created_at", "id"], postgresql_where=waiting, sqlite_where=waiting)


def downgrade() -> None:
    op.drop_index(WAITING, table_name="runs")
    op.drop_index(HOLDING, table_name="runs")
