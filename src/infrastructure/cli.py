"""The `threadline` command: serve, migrate, and the operator's tenant administration."""

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar
from uuid import UUID

import typer
from cryptography.fernet import Fernet
from pydantic import ValidationError

from application.caller import Caller
from application.pagination import PageRequest
from application.use_cases.api_keys import IssuedApiKey
from domain.agents import Agent
from domain.api_keys import ApiKey, Role
from domain.errors import DomainError
from domain.ids import ApiKeyId
from infrastructure.container import Container
from infrastructure.logging import configure_logging
from infrastructure.persistence import migrations
from infrastructure.resources import close_resources, open_resources
from infrastructure.settings import Settings, invalid_settings

T = TypeVar("T")

EVENT_LOOP_TURN_SECONDS = 0.0005
"""How long another thread of a serving process (the trace exporter's, SQLite's) may hold the interpreter before
the event loop's thread gets it back. Python's default, 5 ms, delayed a run by as much whenever traces were being
exported meanwhile."""

app = typer.Typer(help="Threadline: a multi-tenant agent platform API.", no_args_is_help=True, add_completion=False)
orgs_app = typer.Typer(help="Organizations (tenants).", no_args_is_help=True)
keys_app = typer.Typer(help="API keys of an organization.", no_args_is_help=True)
secrets_app = typer.Typer(help="The keys that encrypt stored credentials.", no_args_is_help=True)
agents_app = typer.Typer(help="Agents of an organization.", no_args_is_help=True)
prompts_app = typer.Typer(help="Prompt template files.", no_args_is_help=True)
app.add_typer(agents_app, name="agents")
app.add_typer(prompts_app, name="prompts")
app.add_typer(orgs_app, name="orgs")
app.add_typer(keys_app, name="keys")
app.add_typer(secrets_app, name="secrets")


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(code=1)


def _run(work: Callable[[Container], Awaitable[T]]) -> T:
    """Run one piece of async work with a container, turning domain errors into a clear message.

    The work asks for use cases with `await provider.async_()`, which opens only the resources they need.
    """
    container = Container()

    async def main() -> T:
        try:
            return await work(container)
        finally:
            await close_resources(container)

    try:
        return asyncio.run(main())
    except DomainError as error:
        raise _fail(error.detail) from None
    except OSError as error:
        raise _fail(f"cannot reach the database: {error}") from None


def _migrate(container: Container) -> None:
    database_url = container.settings().database_url
    try:
        migrations.upgrade(database_url)
    except Exception as error:  # alembic and drivers raise many kinds; the operator needs the message
        raise _fail(f"migration failed: {error}") from None


def _index_stored_sources() -> int:
    """Sources stored before sources were indexed become searchable (once: indexed ones are not read again)."""

    async def work(c: Container) -> int:
        return await (await c.index_stored_sources.async_()).execute()

    return _run(work)


@app.command()
def migrate() -> None:
    """Upgrade the database schema to the latest revision."""
    _migrate(Container())
    indexed = _index_stored_sources()
    typer.echo("database is at the latest revision" + (f"; {indexed} stored source(s) indexed" if indexed else ""))


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Listen address (THREADLINE_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port (THREADLINE_PORT)")] = None,
    migrate_first: Annotated[bool, typer.Option("--migrate/--no-migrate", help="Run migrations first")] = True,
) -> None:
    """Start the HTTP API."""
    import uvicorn

    from infrastructure.http.app import create_app

    container = Container()
    settings = container.settings()
    configure_logging(settings.log_level, settings.log_format)
    sys.setswitchinterval(EVENT_LOOP_TURN_SECONDS)
    if migrate_first:
        _migrate(container)
        _index_stored_sources()
    from infrastructure.http.server import StoppingServer

    application = create_app(container)
    config = uvicorn.Config(
        application,
        host=host or settings.host,
        port=port or settings.port,
        log_config=None,
        access_log=True,
        lifespan="on",
        timeout_graceful_shutdown=settings.shutdown_grace_seconds,
        timeout_keep_alive=settings.keep_alive_seconds,
    )
    StoppingServer(config, stopping=application.state.stopping).run()


@app.command()
def worker(
    concurrency: Annotated[int | None, typer.Option(help="Runs at once (THREADLINE_WORKER_CONCURRENCY)")] = None,
    queues: Annotated[list[str] | None, typer.Option("--queue", help="Queue to take runs from (repeatable)")] = None,
) -> None:
    """Execute runs taken from the job queue (THREADLINE_EXECUTOR=queue, PostgreSQL), until SIGTERM or Ctrl+C."""
    from infrastructure.execution.job_queue import QUEUE, work
    from infrastructure.execution.worker_metrics import worker_metrics
    from infrastructure.heap import settle_heap
    from infrastructure.settings import Executor

    container = Container()
    container.follows_runs.override(False)  # its runs' followers are served by the API processes
    container.serves_requests.override(False)
    settings = container.settings()
    configure_logging(settings.log_level, settings.log_format)
    sys.setswitchinterval(EVENT_LOOP_TURN_SECONDS)
    if settings.executor is not Executor.QUEUE:
        raise _fail("a worker executes runs of the job queue: set THREADLINE_EXECUTOR=queue (PostgreSQL)")

    async def main() -> None:
        await open_resources(container)
        try:
            await container.passage_indexer().start()
            async with worker_metrics(container.metrics(), container.run_executor(), settings):
                settle_heap()
                await work(
                    container.run_executor(),
                    container.worker_runs(),
                    queues=queues or [QUEUE],
                    concurrency=concurrency or settings.worker_concurrency,
                    grace_seconds=settings.worker_grace_seconds,
                    lost_seconds=settings.worker_lost_seconds,
                    stranded=lambda silent_seconds: container.recover_runs().end_stranded(silent_seconds),
                )
        finally:
            await close_resources(container)

    from uvicorn.loops.auto import auto_loop_factory

    # The loop the API runs on, as uvicorn picks it (uvloop where it is installed).
    with asyncio.Runner(loop_factory=auto_loop_factory()) as runner:
        runner.run(main())


async def _caller_for(container: Container, org_slug: str) -> Caller:
    org = await (await container.find_organization.async_()).execute(org_slug)
    return Caller.operator(org.id)


@orgs_app.command("create")
def create_org(
    name: Annotated[str, typer.Argument(help="Display name")],
    slug: Annotated[str | None, typer.Option(help="URL-safe identifier; derived from the name if absent")] = None,
) -> None:
    """Create an organization and print its first admin API key (shown only this once)."""
    from application.use_cases.organizations import CreatedOrganization, CreateOrganizationCommand

    async def work(c: Container) -> CreatedOrganization:
        return await (await c.create_organization.async_()).execute(CreateOrganizationCommand(name=name, slug=slug))

    created = _run(work)
    typer.echo(f"organization: {created.organization.slug} ({created.organization.id})")
    typer.echo(f"admin API key (store it now, it is not shown again): {created.admin_key_plaintext}")


@orgs_app.command("set-limits")
def set_limits(
    slug: Annotated[str, typer.Argument(help="Organization slug")],
    max_concurrent_runs: Annotated[
        int | None,
        typer.Option(help="Its runs executed at once, deployment-wide; 0: THREADLINE_ORG_MAX_CONCURRENT_RUNS"),
    ] = None,
    runs_per_minute: Annotated[
        int | None, typer.Option(help="Runs it may start per minute; 0: THREADLINE_ORG_RUNS_PER_MINUTE")
    ] = None,
) -> None:
    """Give an organization limits of its own (an option left out keeps its current value)."""
    from application.use_cases.organizations import SetOrganizationLimitsCommand
    from domain.organizations import Organization

    async def work(c: Container) -> tuple[Organization, Settings]:
        org = await (await c.find_organization.async_()).execute(slug)
        concurrent = org.max_concurrent_runs if max_concurrent_runs is None else (max_concurrent_runs or None)
        per_minute = org.runs_per_minute if runs_per_minute is None else (runs_per_minute or None)
        command = SetOrganizationLimitsCommand(slug=slug, max_concurrent_runs=concurrent, runs_per_minute=per_minute)
        return await (await c.set_organization_limits.async_()).execute(command), c.settings()

    org, settings = _run(work)
    concurrent = org.max_concurrent_runs or f"{settings.org_max_concurrent_runs} (deployment default)"
    per_minute = org.runs_per_minute or settings.org_runs_per_minute or "no limit"
    if org.runs_per_minute is None and settings.org_runs_per_minute:
        per_minute = f"{per_minute} (deployment default)"
    typer.echo(f"organization: {org.slug}")
    typer.echo(f"max concurrent runs: {concurrent}")
    typer.echo(f"runs per minute: {per_minute}")


@orgs_app.command("set-language")
def set_search_language(
    slug: Annotated[str, typer.Argument(help="Organization slug")],
    language: Annotated[str, typer.Argument(help="english, french, german, … or simple (no stemming)")],
) -> None:
    """Set the language an organization's sources are searched in; its passages are indexed again in it."""
    from application.use_cases.organizations import UpdateOrganizationCommand
    from domain.organizations import Organization

    async def work(c: Container) -> Organization:
        command = UpdateOrganizationCommand(caller=await _caller_for(c, slug), search_language=language)
        return await (await c.update_organization.async_()).execute(command)

    org = _run(work)
    typer.echo(f"organization: {org.slug}")
    typer.echo(f"search language: {org.search_language}")


@keys_app.command("create")
def create_key(
    org: Annotated[str, typer.Option(help="Organization slug")],
    name: Annotated[str, typer.Option(help="What the key is for")],
    role: Annotated[Role, typer.Option(help="admin or member")] = Role.MEMBER,
) -> None:
    """Create an API key and print it (shown only this once)."""
    from application.use_cases.api_keys import CreateApiKeyCommand

    async def work(c: Container) -> IssuedApiKey:
        caller = await _caller_for(c, org)
        return await (await c.create_api_key.async_()).execute(CreateApiKeyCommand(caller=caller, name=name, role=role))

    issued = _run(work)
    typer.echo(f"key id: {issued.api_key.id}")
    typer.echo(f"API key (store it now, it is not shown again): {issued.plaintext}")


@keys_app.command("list")
def list_keys(org: Annotated[str, typer.Option(help="Organization slug")]) -> None:
    """List an organization's API keys (never their secrets)."""

    async def work(c: Container) -> list[ApiKey]:
        caller = await _caller_for(c, org)
        list_keys = await c.list_api_keys.async_()
        keys: list[ApiKey] = []
        cursor: str | None = None
        while True:
            page = await list_keys.execute(caller, PageRequest(limit=100, cursor=cursor))
            keys.extend(page.items)
            if page.next_cursor is None:
                return keys
            cursor = page.next_cursor

    for key in _run(work):
        state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
        typer.echo(f"{key.id}  tl_{key.prefix}_…  {key.role.value:6}  {state:24}  {key.name}")


@keys_app.command("revoke")
def revoke_key(
    key_id: Annotated[str, typer.Argument(help="Id of the key (see `keys list`)")],
    org: Annotated[str, typer.Option(help="Organization slug")],
) -> None:
    """Revoke an API key: requests with it are refused from now on."""
    try:
        parsed = ApiKeyId(UUID(key_id))
    except ValueError:
        raise _fail(f"{key_id!r} is not a key id (see `threadline keys list --org {org}`)") from None

    async def work(c: Container) -> ApiKey:
        return await (await c.revoke_api_key.async_()).execute(await _caller_for(c, org), parsed)

    key = _run(work)
    typer.echo(f"revoked {key.id} ({key.name})")


@secrets_app.command("generate")
def generate_secret() -> None:
    """Print a new random key for THREADLINE_SECRET_KEY (a Fernet key, used as is: no passphrase derivation)."""
    typer.echo(Fernet.generate_key().decode())


@secrets_app.command("rotate")
def rotate_secrets() -> None:
    """Re-encrypt every stored credential with the first key of THREADLINE_SECRET_KEY.

    To rotate: put the new key first (`new,old`), run this, then drop the old key. Credentials stored under
    a passphrase's derivation of older releases (one SHA-256) are moved to its scrypt derivation too.
    """

    async def work(c: Container) -> int:
        return await (await c.rotate_credential_encryption.async_()).execute()

    count = _run(work)
    typer.echo(f"re-encrypted {count} stored credential(s) with the current key")


@agents_app.command("import")
def import_agent(
    file: Annotated[Path, typer.Argument(help="A ChatMD file: its system/developer messages become the instructions")],
    org: Annotated[str, typer.Option(help="Organization slug")],
    model: Annotated[str | None, typer.Option(help="Model of the agent (else the file's, else the default)")] = None,
) -> None:
    """Create an agent from a ChatMD file."""
    from application.use_cases.agents import CreateAgentCommand
    from infrastructure.template_files import read_chatmd_agent

    read = read_chatmd_agent(file)
    if isinstance(read, list):
        for problem in read:
            typer.secho(str(problem), fg=typer.colors.RED, err=True)
        raise typer.Exit(code=1)
    for warning in read.warnings:
        typer.secho(f"warning: {warning}", fg=typer.colors.YELLOW, err=True)

    async def work(c: Container) -> Agent:
        caller = await _caller_for(c, org)
        return await (await c.create_agent.async_()).execute(
            CreateAgentCommand(
                caller=caller,
                name=read.name,
                slug=read.slug,
                description=read.description,
                instructions=read.instructions,
                model=model or read.model,
                tools=read.tools,
            ),
        )

    agent = _run(work)
    typer.echo(f"agent {agent.slug} ({agent.id}) with {len(agent.tools)} tool(s), model {agent.model}")


@prompts_app.command("check")
def check_prompts(directory: Annotated[Path, typer.Argument(help="A prompts directory, or one file")]) -> None:
    """Check prompt template files; every problem is reported with its file and line."""
    from infrastructure.template_files import check_prompts as check

    report = check(directory)
    for line in report.lines:
        typer.echo(line)
    typer.echo(report.summary)
    if not report.ok:
        raise typer.Exit(code=1)


def main() -> None:
    try:
        app()
    except ValidationError as error:
        problems = invalid_settings(error)
        if problems is None:
            raise
        typer.secho(f"error: the configuration is invalid\n{problems}", fg=typer.colors.RED, err=True)
        raise SystemExit(2) from None
