import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

import httpx
import pytest
from asgi_lifespan import LifespanManager
from dependency_injector import providers
from fastapi import FastAPI

from application.ports.persistence import UnitOfWork
from application.use_cases.organizations import CreateOrganizationCommand
from infrastructure.container import Container
from infrastructure.execution.job_queue import work
from infrastructure.execution.run_queue import QUEUE
from infrastructure.http.app import create_app
from infrastructure.persistence import migrations
from infrastructure.persistence.unit_of_work import SqlAlchemyUnitOfWork
from infrastructure.resources import close_resources, open_resources
from infrastructure.settings import Executor, Settings
from tests.databases import backend, fresh_database
from tests.fakes.loopback import LoopbackServer
from tests.mcp_servers import everything, filesystem

PROMPT_FILES_ORG = "prompt-files"
"""The organization the test server's prompts directory serves (tests create it when they need it)."""

QUEUE_NEEDS_POSTGRESQL = "the queue executor needs PostgreSQL: set THREADLINE_TEST_POSTGRES_URL to run it too"
EXECUTORS = [
    # None: what pytest sees for a test that is not parametrized, so both share the suite's in-process app.
    pytest.param(None, id="in_process"),
    *([pytest.param(Executor.QUEUE, id="queue")] if backend() == "postgresql" else []),
]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "executors(*ids): run the test once per executor (in_process, and queue on PostgreSQL; or only those "
        "named), the app and its runs set up for each",
    )


def pytest_report_header() -> str:
    executors = ", ".join(str(p.id) for p in EXECUTORS)
    return f"executors: {executors}" + ("" if backend() == "postgresql" else f" ({QUEUE_NEEDS_POSTGRESQL})")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked `executors` (a module's pytestmark, or one test) run on each executor."""
    marker = metafunc.definition.get_closest_marker("executors")
    if marker is None or "executor" not in metafunc.fixturenames:
        return
    chosen = [p for p in EXECUTORS if not marker.args or p.id in marker.args]
    metafunc.parametrize("executor", chosen, indirect=True, scope="session")


def operator_servers_file(directory: Path) -> Path:
    """The operator's stdio servers: server-everything, and server-filesystem serving a directory of its own."""
    path = directory / "mcp-servers.json"
    files = directory / "files"
    files.mkdir(exist_ok=True)
    (files / "hello.txt").write_text("Hello from the files.\n")
    servers = {}
    for name, command_of in (
        ("everything", everything.stdio_command),
        ("filesystem", lambda: filesystem.stdio_command(files)),
    ):
        try:
            command, args = command_of()
        except Exception:  # not installed: stdio tests skip with their own message
            command, args = "node", ["--version"]
        servers[name] = {"command": command, "args": [*args]}
    path.write_text(json.dumps({"servers": servers}))
    return path


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One migrated database shared by the run; tests keep apart by creating their own organizations."""
    with fresh_database(tmp_path_factory.mktemp("db")) as url:
        migrations.upgrade(url)
        yield url


@pytest.fixture(scope="session")
def executor(request: pytest.FixtureRequest) -> Executor:
    """Where the app's runs execute: in this process, unless a test marked `executors` asks for the queue.
    The suite builds one app per executor, and only one at a time (the routes are wired to one container)."""
    chosen: Executor | None = getattr(request, "param", None)
    return chosen or Executor.IN_PROCESS


@pytest.fixture(scope="session")
def settings(database_url: str, executor: Executor, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    queue = executor is Executor.QUEUE
    return Settings(
        _env_file=None,
        database_url=database_url,
        executor=executor,
        # Two containers (the API's and the worker's) with the job queue's and the event bus's connections each.
        database_pool_size=8 if queue else 20,
        worker_grace_seconds=1,  # the worker stops with the session: what a test left held is handed back soon
        shutdown_grace_seconds=1,  # so does the app: a run a test left going does not hold its shutdown 10 s
        # The database is shared by the whole session, and an app starts once per executor: one that resumed the
        # runs earlier tests left queued would execute them with the model the test then running set up.
        # (Recovery's tests call it themselves.)
        recover_runs=False,
        log_format="text",
        api_key_touch_seconds=0,
        secret_key="test secret key",
        data_dir=tmp_path_factory.mktemp("data"),
        mcp_allowed_networks="127.0.0.0/8",
        mcp_servers_file=operator_servers_file(tmp_path_factory.mktemp("operator")),
        prompts_dir=tmp_path_factory.mktemp("prompts"),
        prompts_org=PROMPT_FILES_ORG,
        prompts_poll_seconds=0.05,
    )


@pytest.fixture(scope="session")
async def container(settings: Settings) -> AsyncIterator[Container]:
    container = Container()
    container.settings.override(providers.Object(settings))
    await open_resources(container)
    yield container
    await close_resources(container)


@pytest.fixture(scope="session")
async def worker(settings: Settings) -> AsyncIterator[Container | None]:
    """With the queue executor, the worker that executes the app's runs (None otherwise).

    It runs in the test process, through the code `threadline worker` runs (`job_queue.work`: procrastinate's
    worker and WorkerRuns), on a container of its own with the app's settings: it shares nothing in memory
    with the app, so run events reach the app's followers through PostgreSQL as they do across processes.
    Not a `threadline worker` subprocess: tests change what executes runs per test (the `openai` and `traced`
    fixtures put a fake model and a trace receiver of their own in the containers), which a process started
    once for the session would not see.
    """
    if settings.executor is not Executor.QUEUE:
        yield None
        return
    container = Container()
    container.settings.override(providers.Object(settings))
    container.follows_runs.override(False)  # as `threadline worker`'s
    await open_resources(container)
    working = asyncio.create_task(
        work(
            container.run_executor(),
            container.worker_runs(),
            queues=[QUEUE],
            concurrency=settings.worker_concurrency,
            grace_seconds=settings.worker_grace_seconds,
            lost_seconds=settings.worker_lost_seconds,
            signals=False,  # Ctrl+C stops pytest, not the worker
        ),
        name="worker",
    )
    try:
        yield container
    finally:
        working.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await working
        await close_resources(container)


@pytest.fixture(scope="session")
def executing(container: Container, worker: Container | None) -> list[Container]:
    """The containers whose language model, tracer and tools runs use: the app's, and the worker's in queue mode
    (the app's executes runs of agents called through /mcp there too)."""
    return [container] if worker is None else [container, worker]


@pytest.fixture(scope="session")
async def app(container: Container, worker: Container | None) -> AsyncIterator[FastAPI]:
    """The application; in queue mode, with the worker that executes its runs."""
    application = create_app(container)
    # Stopping waits the grace (1 s) for runs still going, then up to 10 s for the ones interrupted to record it.
    async with LifespanManager(application, shutdown_timeout=15):
        yield application


@pytest.fixture(scope="session")
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://threadline.test") as http:
        yield http


@pytest.fixture(scope="session")
async def live_url(app: FastAPI) -> AsyncIterator[str]:
    """The same application, served over real HTTP on loopback (its lifespan is already running)."""
    async with LoopbackServer(app, lifespan="off") as server:
        yield server.base_url


@dataclass(frozen=True)
class Tenant:
    """An organization as a test sees it: its id, slug and an admin key's auth header."""

    id: str
    slug: str
    admin: dict[str, str]


class MakeTenant(Protocol):
    """The make_tenant fixture: a new organization of its own on every call."""

    async def __call__(self, name: str = "Tenant") -> Tenant: ...


_counter = 0


@pytest.fixture
def make_tenant(container: Container) -> MakeTenant:
    async def make(name: str = "Tenant") -> Tenant:
        global _counter
        _counter += 1
        created = await container.create_organization().execute(
            CreateOrganizationCommand(name=f"{name} {_counter}", slug=None)
        )
        org = created.organization
        return Tenant(id=str(org.id), slug=org.slug, admin={"Authorization": f"Bearer {created.admin_key_plaintext}"})

    return make


@pytest.fixture
async def tenant(make_tenant: MakeTenant) -> Tenant:
    return await make_tenant("Acme")


def as_port(uow: SqlAlchemyUnitOfWork) -> UnitOfWork:
    """The SQL unit of work as use cases get it from the container: the application's UnitOfWork port.

    Entering it hands out a Transaction that carries the port's repositories and commit, which the
    annotation of SqlAlchemyUnitOfWork.__aenter__ (Self) does not tell the type checker.
    """
    return cast(UnitOfWork, uow)


async def member_headers(client: httpx.AsyncClient, tenant: Tenant) -> dict[str, str]:
    response = await client.post("/v1/api-keys", json={"name": "member", "role": "member"}, headers=tenant.admin)
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['key']}"}
