import contextlib
from types import TracebackType
from typing import Self

from sqlalchemy.ext.asyncio import AsyncConnection

from infrastructure.persistence.engine import READ_ONLY, Database
from infrastructure.persistence.repositories.agents import SqlAgentRepository
from infrastructure.persistence.repositories.api_keys import SqlApiKeyRepository
from infrastructure.persistence.repositories.integrations import SqlMcpIntegrationRepository
from infrastructure.persistence.repositories.messages import SqlMessageRepository
from infrastructure.persistence.repositories.organizations import SqlOrganizationRepository
from infrastructure.persistence.repositories.sources import SqlSourceRepository
from infrastructure.persistence.repositories.threads import SqlThreadRepository


class SqlAlchemyUnitOfWork:
    """One connection and one transaction per `async with`; rolled back unless committed."""

    def __init__(self, database: Database, *, read_only: bool = False) -> None:
        self._database = database
        self._read_only = read_only
        self._connection: AsyncConnection | None = None
        self._stack: contextlib.AsyncExitStack | None = None

    def read_only(self) -> "SqlAlchemyUnitOfWork":
        return SqlAlchemyUnitOfWork(self._database, read_only=True)

    async def __aenter__(self) -> Self:
        if self._connection is not None:
            raise RuntimeError("this unit of work is already open")
        async with contextlib.AsyncExitStack() as stack:
            if not self._read_only:
                await stack.enter_async_context(self._database.writing())
            connection = await stack.enter_async_context(self._database.engine.connect())
            if self._read_only:
                await connection.execution_options(**{READ_ONLY: True})
            await connection.begin()
            self._stack = stack.pop_all()
        self._connection = connection
        self.organizations = SqlOrganizationRepository(connection)
        self.api_keys = SqlApiKeyRepository(connection)
        self.agents = SqlAgentRepository(connection)
        self.threads = SqlThreadRepository(connection)
        self.messages = SqlMessageRepository(connection)
        self.integrations = SqlMcpIntegrationRepository(connection)
        self.sources = SqlSourceRepository(connection)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        connection, stack = self._connection, self._stack
        self._connection = self._stack = None
        if connection is None or stack is None:
            return
        try:
            if connection.in_transaction():
                await connection.rollback()
        finally:
            await stack.aclose()  # closes the connection, then lets the next writer in

    async def commit(self) -> None:
        if self._connection is None:
            raise RuntimeError("commit outside of a unit of work")
        if self._read_only:
            raise RuntimeError("a read-only unit of work cannot commit")
        await self._connection.commit()
