import asyncio
import contextlib
from types import TracebackType
from typing import NoReturn, Self

from sqlalchemy.ext.asyncio import AsyncConnection

from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.engine import READ_ONLY, Database
from infrastructure.persistence.errors import DATABASE_ERRORS, translated, translating
from infrastructure.persistence.repositories.agents import SqlAgentRepository
from infrastructure.persistence.repositories.api_keys import SqlApiKeyRepository
from infrastructure.persistence.repositories.audit_events import SqlAuditEventRepository
from infrastructure.persistence.repositories.integrations import SqlMcpIntegrationRepository
from infrastructure.persistence.repositories.messages import SqlMessageRepository
from infrastructure.persistence.repositories.organizations import SqlOrganizationRepository
from infrastructure.persistence.repositories.passage_vectors import SqlPassageVectorRepository
from infrastructure.persistence.repositories.passages import SqlPassageRepository
from infrastructure.persistence.repositories.prompt_templates import (
    SqlArgumentValueRepository,
    SqlPromptTemplateRepository,
)
from infrastructure.persistence.repositories.run_jobs import SqlRunJobRepository
from infrastructure.persistence.repositories.runs import SqlRunEventRepository, SqlRunRepository
from infrastructure.persistence.repositories.sources import SqlSourceRepository
from infrastructure.persistence.repositories.thread_summaries import SqlThreadSummaryRepository
from infrastructure.persistence.repositories.threads import SqlThreadRepository
from infrastructure.persistence.repositories.usage import SqlUsageRepository
from infrastructure.persistence.vector_cache import VectorCache


class Transaction:
    """One open transaction and the repositories that work in it."""

    def __init__(
        self,
        connection: AsyncConnection,
        stack: contextlib.AsyncExitStack,
        turn: contextlib.AsyncExitStack,
        read_only: bool,
        vectors: VectorCache,
        queued_runs: bool = False,
    ) -> None:
        self._connection, self._stack, self._turn, self._read_only = connection, stack, turn, read_only
        self._writes = writes = UnitConnection(connection, read_only=read_only)
        self.organizations = SqlOrganizationRepository(writes)
        self.api_keys = SqlApiKeyRepository(writes)
        self.agents = SqlAgentRepository(writes)
        self.threads = SqlThreadRepository(writes)
        self.messages = SqlMessageRepository(writes)
        self.integrations = SqlMcpIntegrationRepository(writes)
        self.sources = SqlSourceRepository(writes)
        self.passages = SqlPassageRepository(writes)
        self.passage_vectors = SqlPassageVectorRepository(writes, vectors)
        self.thread_summaries = SqlThreadSummaryRepository(writes)
        self.runs = SqlRunRepository(writes, queued=queued_runs)
        self.run_events = SqlRunEventRepository(writes)
        self.run_jobs = SqlRunJobRepository(writes, queued=queued_runs)
        self.prompt_templates = SqlPromptTemplateRepository(writes)
        self.argument_values = SqlArgumentValueRepository(writes)
        self.audit_events = SqlAuditEventRepository(writes)
        self.usage = SqlUsageRepository(writes)

    async def commit(self) -> None:
        if self._read_only:
            raise RuntimeError("a read-only unit of work cannot commit")
        await self._writes.flush(last=True)
        await self._connection.commit()
        self._writes.committed()
        await self._turn.aclose()  # the next writer may begin: this one has ended

    async def close(self) -> None:
        self._writes.discard()
        try:
            if self._connection.in_transaction():
                await self._connection.rollback()
        finally:
            try:
                await self._turn.aclose()  # ended: the next writer may begin (if the commit did not let it)
            finally:
                await self._stack.aclose()  # closes the connection


def _raise_translated(error: BaseException) -> NoReturn:
    meaning = translated(error)
    if meaning is None:
        raise error
    raise meaning from error


class SqlAlchemyUnitOfWork:
    """`async with uow as tx:` opens one connection and one transaction, rolled back unless committed.

    The same instance may be entered again later, and by several tasks at once (parallel tool calls
    share their use cases): each `async with` gets a transaction of its own.

    Database errors leave it as the application's errors: an outage as StorageUnavailable, a refused
    constraint as the domain error it means (see persistence/errors.py).
    """

    def __init__(self, database: Database, *, read_only: bool = False, queued_runs: bool = False) -> None:
        """`queued_runs`: runs execute from procrastinate's job queue (worker mode), which `run_jobs` adds to."""
        self._database = database
        self._read_only = read_only
        self._queued_runs = queued_runs
        self._open: dict[asyncio.Task[object] | None, list[Transaction]] = {}

    def read_only(self) -> "SqlAlchemyUnitOfWork":
        return SqlAlchemyUnitOfWork(self._database, read_only=True, queued_runs=self._queued_runs)

    async def __aenter__(self) -> Self:
        with translating():
            transaction = await self._begin()
        self._open.setdefault(asyncio.current_task(), []).append(transaction)
        return transaction  # type: ignore[return-value]  # it offers everything the port promises

    async def _begin(self) -> Transaction:
        """A writer takes its turn first (SQLite's writers take turns, see Database.writing), then a connection:
        waiting writers hold none."""
        async with contextlib.AsyncExitStack() as turn, contextlib.AsyncExitStack() as stack:
            if not self._read_only:
                await turn.enter_async_context(self._database.writing())
            if self._database.is_sqlite:
                # Closing it gives it back to the pool with a ROLLBACK that waits for no one (sqlite_driver.py):
                # nothing a cancellation could cut short, so no task of its own to close it in (as the
                # connection's context manager makes, for a close that may wait on a server).
                connection = await self._database.engine.connect()
                stack.push_async_callback(connection.close)
            else:
                connection = await stack.enter_async_context(self._database.engine.connect())
            if self._read_only:
                await connection.execution_options(**{READ_ONLY: True})
            await connection.begin()
            return Transaction(
                connection,
                stack.pop_all(),
                turn.pop_all(),
                self._read_only,
                self._database.vector_cache,
                queued_runs=self._queued_runs,
            )

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        task = asyncio.current_task()
        opened = self._open.get(task)
        if not opened:
            return
        transaction = opened.pop()
        if not opened:
            del self._open[task]
        try:
            await transaction.close()
        except DATABASE_ERRORS as error:
            if exc is None:
                _raise_translated(error)
            # the rollback failed after the work did: the work's error says more
        if isinstance(exc, DATABASE_ERRORS) and (meaning := translated(exc)) is not None:
            raise meaning from exc
