"""Worker mode's admission locks its organization's row FOR NO KEY UPDATE, not FOR UPDATE.

Admissions of one organization are serialized by a lock on its row (see infrastructure/limits/admission.py). Taken
FOR UPDATE, that lock also blocked every write that checks a foreign key to the organization (the check takes a
KEY SHARE lock on its row): a run's creation with its thread and message, the messages and usage records of its
steps. With many runs of one organization at once, each of those writes waited for the admissions queued on the
row (1,000 runs at once on one worker: 150 ms per admission, 50-85 ms per run write, most of it waiting).
FOR NO KEY UPDATE still serializes the admissions (and conflicts with the row's own updates and deletion) but lets
those writes through.

`threadline_admit_run` (migration 0019) is redefined from its own definition, the lock's clause changed.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _relock(old: str, new: str) -> str:
    return f"""
DO $$
DECLARE
    definition text := pg_get_functiondef('threadline_admit_run(uuid, uuid, integer)'::regprocedure);
BEGIN
    IF position('{old}' IN definition) = 0 THEN
        RAISE EXCEPTION 'threadline_admit_run does not lock with "{old}": it is not the function this migration knows';
    END IF;
    EXECUTE replace(definition, '{old}', '{new}');
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":  # worker mode is PostgreSQL's only
        op.execute(_relock("FOR UPDATE OF o", "FOR NO KEY UPDATE OF o"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_relock("FOR NO KEY UPDATE OF o", "FOR UPDATE OF o"))
