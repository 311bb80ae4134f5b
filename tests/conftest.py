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
from infrastructure.http.app import create_app
from infrastructure.persistence import migrations
from infrastructure.persistence.unit_of_work import SqlAlchemyUnitOfWork
from infrastructure.resources import close_resources, open_resources
from infrastructure.settings import Settings
from tests.databases import fresh_database
from tests.fakes.loopback import LoopbackServer
from tests.mcp_servers import everything

PROMPT_FILES_ORG = "prompt-files"
"""The organization the test server's prompts directory serves (tests create it when they need it)."""


def operator_servers_file(directory: Path) -> Path:
    """The operator's stdio servers: server-everything, run with node."""
    path = directory / "mcp-servers.json"
    try:
        command, args = everything.stdio_command()
    except Exception:  # not installed: stdio tests skip with their own message
        command, args = "node", ["--version"]
    path.write_text(json.dumps({"servers": {"everything": {"command": command, "args": [*args]}}}))
    return path


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One migrated database shared by the run; tests keep apart by creating their own organizations."""
    with fresh_database(tmp_path_factory.mktemp("db")) as url:
        migrations.upgrade(url)
        yield url


@pytest.fixture(scope="session")
def settings(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(
        _env_file=None,
        database_url=database_url,
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
async def app(container: Container) -> AsyncIterator[FastAPI]:
    application = create_app(container)
    async with LifespanManager(application):
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
