"""What the container opens and closes.

Each resource is built on first use (a CLI command builds only what it uses) and closed by
`close_resources`: first the background ones, whose work still uses the others (runs in flight,
the prompt directory watch), then the rest.

What only PostgreSQL uses (psycopg's listeners, procrastinate's queue) is imported where it is opened: a server on
SQLite runs without those modules (9 MB of its memory), one on PostgreSQL without procrastinate unless it is in
worker mode.
"""

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from dependency_injector import containers, providers
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from application.loaded_integrations import LoadedIntegrations
from application.ports.execution import RunEventBus, RunExecutor
from application.ports.mcp import McpGateway
from application.ports.tracing import Tracer
from application.retrieval import EmbedPassages
from application.runs.execute_run import RunExecution
from application.runs.recorder import Began
from domain.ids import OrgId, RunId
from infrastructure.execution.event_bus import InMemoryRunEventBus
from infrastructure.execution.in_process import InProcessRunExecutor
from infrastructure.execution.local_catalog_changes import LocalCatalogChanges
from infrastructure.execution.passage_indexer import PassageIndexer
from infrastructure.limits.admission import RunAdmission
from infrastructure.limits.org_limits import OrgLimits
from infrastructure.llm import ModelRouter, language_model
from infrastructure.llm.openai_embeddings import OpenAiEmbeddings
from infrastructure.mcp_client.gateway import SdkMcpGateway
from infrastructure.mcp_forgetting import ForgetsLoadedIntegrations
from infrastructure.mcp_server.server import PublishingServer
from infrastructure.metrics import MeteredMcpGateway, Metrics
from infrastructure.persistence.engine import Database
from infrastructure.persistence.run_holders import heard_from, holding_runs
from infrastructure.security.verified_keys import VerifiedKeyCache
from infrastructure.settings import Executor, Settings
from infrastructure.template_files.registry import TemplateFileRegistry
from infrastructure.tracing import LangfuseTracer, NoopTracer

if TYPE_CHECKING:
    from infrastructure.execution.job_queue import Execute, WorkerRuns
    from infrastructure.execution.pg_listener import Notices


class Background(providers.Resource[Any]):
    """A resource that works on its own and uses the others: closed before them."""


async def open_resources(container: containers.Container) -> None:
    """Open every resource. Afterwards providers hand out plain objects, as the code expects.

    While an async resource is unopened, dependency-injector answers every provider that depends on it
    with an awaitable (and remembers that); once all are open, that mode is switched off again.
    """
    # The credentials' keys first (before anything is opened that a failure here would leave open), not in the first
    # run that opens a credential: a passphrase's key takes scrypt a fraction of a second, which would hold the event
    # loop, and every run of the process, then.
    container.secret_box()
    await _awaited(container.init_resources())
    provider: providers.Provider[Any]
    for provider in container.traverse():
        if isinstance(provider, providers.Resource):
            provider.disable_async_mode()
        else:
            provider.reset_async_mode()


async def close_resources(container: containers.Container) -> None:
    """Close what was opened, background resources first. Closing twice is harmless.

    Async mode (closing answers an awaitable) is switched on for the background resources alone while they
    close: runs still in flight during the executor's grace period keep getting a plain database and model."""
    for resource in container.traverse(types=[Background]):
        resource.enable_async_mode()
    await _awaited(container.shutdown_resources(resource_type=Background))
    for resource in container.traverse(types=[providers.Resource]):
        resource.enable_async_mode()
    await _awaited(container.shutdown_resources())


async def _awaited(result: Awaitable[None] | None) -> None:
    if result is not None:
        await result


async def database(database_url: str, pool_size: int) -> AsyncIterator[Database]:
    opened = Database(database_url, pool_size=pool_size)
    try:
        yield opened
    finally:
        await opened.dispose()


async def language_models(**settings: Any) -> AsyncIterator[ModelRouter]:
    router = language_model(**settings)
    try:
        yield router
    finally:
        await router.aclose()


async def embeddings(settings: Settings) -> AsyncIterator[OpenAiEmbeddings | None]:
    """The embeddings model when THREADLINE_EMBEDDINGS_MODEL is set, else None (full-text search only)."""
    key = settings.embeddings_api_key or settings.openai_api_key
    if not settings.embeddings_model or key is None:
        yield None
        return
    model = OpenAiEmbeddings(
        model=settings.embeddings_model,
        api_key=key.get_secret_value(),
        base_url=settings.embeddings_base_url or settings.openai_base_url or None,
        timeout_seconds=settings.openai_timeout_seconds,
        max_retries=settings.openai_max_retries,
    )
    try:
        yield model
    finally:
        await model.aclose()


async def passage_indexer(
    embed: Callable[[], EmbedPassages] | None, settings: Settings
) -> AsyncIterator[PassageIndexer]:
    """Embeds passages in the background once started (by `serve` and `worker`), when embeddings are on."""
    indexer = PassageIndexer(
        embed, poll_seconds=settings.embeddings_poll_seconds, retry_seconds=settings.embeddings_retry_seconds
    )
    try:
        yield indexer
    finally:
        await indexer.stop()


async def tracer(settings: Settings) -> AsyncIterator[Tracer]:
    if not (settings.langfuse_public_key and settings.langfuse_secret_key):
        yield NoopTracer()
        return
    langfuse = LangfuseTracer(
        public_key=settings.langfuse_public_key,
        secret_key=settings.langfuse_secret_key.get_secret_value(),
        base_url=settings.langfuse_base_url,
        environment=settings.langfuse_environment,
        release=settings.langfuse_release,
        timeout_seconds=settings.langfuse_timeout_seconds,
    )
    try:
        yield langfuse
    finally:
        await langfuse.shutdown()  # sends the spans still buffered


async def mcp_gateway(metrics: Metrics, loaded: LoadedIntegrations, **settings: Any) -> AsyncIterator[McpGateway]:
    gateway = SdkMcpGateway(**settings)
    try:
        yield cast(McpGateway, ForgetsLoadedIntegrations(cast(McpGateway, MeteredMcpGateway(gateway, metrics)), loaded))
    finally:
        await gateway.close()


def executing(runs: Callable[[], RunExecution]) -> "Execute":
    async def execute(
        org_id: OrgId, run_id: RunId, *, hand_back_on_outage: bool = False, began: object = None
    ) -> object:
        # a fresh execution per run: they are cheap
        started = cast("Began | None", began)  # what the transaction that created the run started it with
        return await runs().execute(org_id, run_id, hand_back_on_outage=hand_back_on_outage, began=started)

    return execute


def worker_runs(execute: "Execute", admission: RunAdmission) -> "WorkerRuns":
    """What a worker executes its jobs' runs with (worker mode)."""
    from infrastructure.execution.job_queue import WorkerRuns

    return WorkerRuns(execute, admission)


def org_concurrency(limits: OrgLimits) -> Callable[[OrgId], Awaitable[int]]:
    async def limit(org_id: OrgId) -> int:
        try:
            return (await limits.of(org_id)).max_concurrent_runs
        except SQLAlchemyError:
            return limits.default.max_concurrent_runs  # the database is away: the deployment's limit applies

    return limit


async def run_executor(
    settings: Settings, runs: Callable[[], RunExecution], *, org_limits: OrgLimits
) -> AsyncIterator[RunExecutor]:
    """In worker mode, the job queue (a worker process takes its jobs from the same object); else this process.
    Either way, the other processes can tell whether this one lives (run_holders.py)."""
    if settings.executor is Executor.QUEUE:
        from infrastructure.execution import job_queue

        # The queue's own pool: a quarter of the process's connections (`database_pool_size`, twice with overflow).
        pool_size, lost_seconds = max(2, settings.database_pool_size // 2), settings.worker_lost_seconds
        async with (
            heard_from(settings.database_url, lost_seconds),
            job_queue.opened(settings.database_url, pool_size, lost_seconds) as app,
        ):
            yield job_queue.QueueRunExecutor(app, lost_seconds)
        return
    async with holding_runs(settings.database_url):  # other processes leave this one's runs alone
        executor = InProcessRunExecutor(
            executing(runs),
            concurrency=settings.max_concurrent_runs,
            org_limit=org_concurrency(org_limits),
        )
        try:
            yield executor
        finally:
            await executor.shutdown(grace_seconds=settings.shutdown_grace_seconds)


async def notices(settings: Settings) -> AsyncIterator["Notices | None"]:
    """On PostgreSQL, the process's listening connection, one for all the channels it listens to (see
    pg_listener.py); None on SQLite."""
    if make_url(settings.database_url).get_backend_name() != "postgresql":
        yield None
        return
    from infrastructure.execution.pg_listener import Notices

    listening = Notices(settings.database_url)
    try:
        yield listening
    finally:
        await listening.close()


async def run_event_bus(
    settings: Settings, notices: "Notices | None", listening: bool = True
) -> AsyncIterator[RunEventBus]:
    """In worker mode, events travel between processes through PostgreSQL; else they stay in this one. A
    process that serves no followers (`listening` False: a worker) only sends: it does not receive every event
    of the deployment's other processes."""
    if settings.executor is not Executor.QUEUE:
        yield InMemoryRunEventBus()
        return
    from infrastructure.execution.pg_event_bus import PostgresRunEventBus

    bus = PostgresRunEventBus(settings.database_url, listening=listening, notices=notices)
    await bus.start()
    try:
        yield bus
    finally:
        await bus.close()


async def catalog_changes(
    database: Database, gateway: McpGateway, publishing: PublishingServer, notices: "Notices | None"
) -> AsyncIterator[None]:
    """MCP catalog changes reach this process: on PostgreSQL those made through any process (see
    pg_catalog_changes.py), else those made by this one (local_catalog_changes.py)."""
    if notices is None:
        local = LocalCatalogChanges(database.engine, publishing.catalog_changed, publishing.sources_changed)
        try:
            yield
        finally:
            await local.close()
        return
    from infrastructure.execution.pg_catalog_changes import CatalogChangeListener

    listener = CatalogChangeListener(
        forget=gateway.forget, published=publishing.catalog_changed, sources_changed=publishing.sources_changed
    )
    await notices.listen(listener)
    try:
        yield
    finally:
        await listener.close()


async def key_revocations(
    keys: VerifiedKeyCache, notices: "Notices | None", serves_requests: bool = True
) -> AsyncIterator[None]:
    """Verified API keys are trusted only while revocations reach them: on PostgreSQL, through the listener
    (see key_revocations.py); on SQLite, through the file next to the database to which a process revoking a key
    adds a line (the command line's `threadline keys revoke` included; see verified_keys.py). A database in
    memory has no such file: each request reads its key. A process that serves no requests (a worker) verifies
    no key: it does not listen."""
    if notices is None or not serves_requests:
        if notices is None and keys.stamp is not None:
            keys.trust()
        try:
            yield
        finally:
            keys.distrust()
        return
    from infrastructure.security.key_revocation_listener import KeyRevocationListener

    await notices.listen(KeyRevocationListener(keys))
    try:
        yield
    finally:
        keys.distrust()


async def template_files(**settings: Any) -> AsyncIterator[TemplateFileRegistry]:
    """The prompt template files; the server starts watching them once everything is open."""
    registry = TemplateFileRegistry(**settings)
    try:
        yield registry
    finally:
        await registry.stop()
