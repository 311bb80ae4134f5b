from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from infrastructure.persistence.migrations import current_revisions, head_revisions


class DatabaseReadiness:
    """Whether the database answers and its schema is at the latest migration."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def problem(self) -> str | None:
        try:
            async with self._engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
            current = await current_revisions(self._engine)
        except (SQLAlchemyError, OSError) as error:
            return f"database unreachable: {type(error).__name__}"
        heads = head_revisions()
        if current != heads:
            found = ", ".join(sorted(current)) or "no revision"
            return f"database schema at {found}, expected {', '.join(sorted(heads))}: run `threadline migrate`"
        return None
