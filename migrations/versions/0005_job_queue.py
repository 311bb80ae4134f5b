"""The job queue of worker mode: procrastinate's schema, on PostgreSQL only.

The schema is procrastinate 3.10.0's, kept in `migrations/procrastinate/` so this revision never changes
under an installed database; a newer procrastinate brings its own migration files, applied by a new revision.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

import re
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = (Path(__file__).parent.parent / "procrastinate" / "schema-3.10.0.sql").read_text()


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # worker mode needs PostgreSQL; SQLite runs execute in the API process
    # A script of many statements (with dollar-quoted function bodies): sent as one simple query.
    driver = op.get_bind().connection.dbapi_connection
    driver.run_async(lambda connection: connection.execute(SCHEMA))  # type: ignore[union-attr]


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for kind in ("TABLE", "FUNCTION", "TYPE"):
        for name in reversed(re.findall(rf"^CREATE {kind} (\w+)", SCHEMA, re.MULTILINE)):
            op.execute(f"DROP {kind} IF EXISTS {name} CASCADE")
