"""`threadline secrets rotate` on a database whose credentials an older release stored: they still work before
the rotation, and after it they are sealed under the scrypt derivation of the new key alone."""

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from dependency_injector import providers
from typer.testing import CliRunner

from application.caller import Caller
from application.use_cases.integrations import CreateMcpIntegrationCommand
from application.use_cases.organizations import CreateOrganizationCommand
from domain.ids import IntegrationId, OrgId
from domain.integrations import AuthType
from infrastructure.cli import app
from infrastructure.container import Container
from infrastructure.persistence import migrations
from infrastructure.resources import close_resources, open_resources
from infrastructure.security.secret_box import FernetSecretBox
from infrastructure.settings import Settings
from tests.conftest import as_port
from tests.databases import fresh_database
from tests.e2e.test_cli import THREADLINE
from tests.fakes.mcp_server import FakeMcpServer
from tests.unit.test_secret_box import scrypt_fernet, sha256_fernet

TOKEN = "server-token-5678"


@pytest.fixture
def database(tmp_path: Path) -> Iterator[str]:
    """A database of its own: the rotation re-encrypts every credential stored in it."""
    with fresh_database(tmp_path) as url:
        migrations.upgrade(url)
        yield url


@pytest.fixture
async def server() -> AsyncIterator[FakeMcpServer]:
    async with FakeMcpServer(token=TOKEN) as server:
        yield server


class Deployment:
    """Threadline on the database with one secret key setting, as a container."""

    def __init__(self, database: str, tmp_path: Path) -> None:
        self.database, self.tmp_path = database, tmp_path

    async def container(self, secret_key: str) -> Container:
        container = Container()
        settings = Settings(
            _env_file=None,
            database_url=self.database,
            database_pool_size=2,
            secret_key=secret_key,
            data_dir=self.tmp_path / "data",
            mcp_allowed_networks="127.0.0.0/8",
        )
        container.settings.override(providers.Object(settings))
        await open_resources(container)
        return container

    async def rotate(self, secret_key: str) -> str:
        """`threadline secrets rotate`, run as the operator runs it."""
        env = os.environ | {
            "THREADLINE_DATABASE_URL": self.database,
            "THREADLINE_SECRET_KEY": secret_key,
            "THREADLINE_DATA_DIR": str(self.tmp_path / "data"),
            "THREADLINE_LOG_FORMAT": "text",
        }
        process = await asyncio.create_subprocess_exec(
            THREADLINE, "secrets", "rotate", env=env, cwd=self.tmp_path, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await process.communicate()
        assert process.returncode == 0
        return out.decode()


async def stored_ciphertext(container: Container, org_id: OrgId, integration_id: IntegrationId) -> str:
    async with as_port(container.uow()).read_only() as uow:
        integration = await uow.integrations.get(org_id, integration_id)
    assert integration is not None and integration.credentials is not None
    return integration.credentials.ciphertext


async def test_credentials_of_an_older_release_work_and_rotate_to_the_new_key(
    database: str, tmp_path: Path, server: FakeMcpServer
) -> None:
    deployment = Deployment(database, tmp_path)
    old = await deployment.container("old passphrase")
    try:
        created = await old.create_organization().execute(CreateOrganizationCommand(name="Rotating", slug=None))
        caller = Caller.operator(created.organization.id)
        integration = await old.create_mcp_integration().execute(
            CreateMcpIntegrationCommand(
                caller=caller, name="Memo", url=server.url, auth_type=AuthType.BEARER, credentials=TOKEN
            )
        )
        org_id, integration_id = created.organization.id, integration.id
        async with as_port(old.uow()) as uow:  # as an older release sealed it: one SHA-256 of the passphrase
            legacy = sha256_fernet("old passphrase").encrypt(TOKEN.encode()).decode()
            await uow.integrations.replace_ciphertext(org_id, integration_id, legacy)
            await uow.commit()
        tested = await old.test_mcp_integration().execute(caller, integration_id)
        assert tested.error is None  # the server got the credential
    finally:
        await close_resources(old)

    assert "re-encrypted 1 stored credential(s)" in await deployment.rotate("new passphrase,old passphrase")

    new = await deployment.container("new passphrase")
    try:
        rotated = await stored_ciphertext(new, org_id, integration_id)
        assert scrypt_fernet("new passphrase").decrypt(rotated.encode()) == TOKEN.encode()
        assert TOKEN not in rotated
        tested = await new.test_mcp_integration().execute(caller, integration_id)
        assert tested.error is None
    finally:
        await close_resources(new)


def test_a_generated_key_is_a_fernet_key_used_as_it_is() -> None:
    generated = CliRunner().invoke(app, ["secrets", "generate"])
    assert generated.exit_code == 0
    key = generated.stdout.strip()
    sealed = FernetSecretBox([key]).seal("token-123")
    assert Fernet(key.encode()).decrypt(sealed.encode()) == b"token-123"
