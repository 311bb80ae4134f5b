"""The operator's command line, and `threadline serve` as a real process on loopback."""

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from dependency_injector import providers
from typer.testing import CliRunner

from application.use_cases.organizations import CreateOrganizationCommand
from infrastructure.cli import app
from infrastructure.container import Container
from infrastructure.resources import close_resources
from infrastructure.settings import Settings
from tests.databases import fresh_database
from tests.servers import free_port

THREADLINE = str(Path(sys.executable).with_name("threadline"))


def first_group(pattern: str, text: str) -> str:
    """The first group of PATTERN's match in TEXT (no match fails the test)."""
    found = re.search(pattern, text)
    assert found is not None, (pattern, text)
    return found.group(1)


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with fresh_database(tmp_path_factory.mktemp("cli")) as url:
        yield os.environ | {"THREADLINE_DATABASE_URL": url, "THREADLINE_LOG_FORMAT": "text"}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The `threadline` command, run in this process as its console script runs it."""
    result = CliRunner().invoke(app, list(args), env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def test_operator_creates_an_org_and_manages_keys(cli_env: dict[str, str]) -> None:
    assert cli(cli_env, "migrate").returncode == 0
    created = cli(cli_env, "orgs", "create", "Initech Corp")
    assert created.returncode == 0, created.stderr
    assert "initech-corp" in created.stdout
    assert re.search(r"tl_[a-z0-9]{12}_\S{43}", created.stdout)

    again = cli(cli_env, "orgs", "create", "Initech Corp")
    assert again.returncode == 1
    assert "already exists" in again.stderr and "Traceback" not in again.stderr

    key = cli(cli_env, "keys", "create", "--org", "initech-corp", "--name", "deploy bot", "--role", "member")
    assert key.returncode == 0, key.stderr
    key_id = first_group(r"key id: (\S+)", key.stdout)
    secret = first_group(r"(tl_\S+)", key.stdout)

    listed = cli(cli_env, "keys", "list", "--org", "initech-corp")
    assert "deploy bot" in listed.stdout and secret not in listed.stdout

    assert cli(cli_env, "keys", "revoke", key_id, "--org", "initech-corp").returncode == 0
    assert "revoked" in cli(cli_env, "keys", "list", "--org", "initech-corp").stdout

    for bad in (
        ("keys", "create", "--org", "nope", "--name", "x"),
        ("keys", "revoke", "not-an-id", "--org", "initech-corp"),
        ("keys", "create", "--org", "initech-corp", "--name", "x", "--role", "owner"),
        ("orgs", "create", ""),
    ):
        result = cli(cli_env, *bad)
        assert result.returncode != 0, bad
        assert "Traceback" not in result.stderr, bad


def test_serve_migrates_and_answers_on_loopback(tmp_path: Path) -> None:
    with fresh_database(tmp_path) as url:
        env = os.environ | {"THREADLINE_DATABASE_URL": url, "THREADLINE_LOG_FORMAT": "text"}
        port = free_port()
        server = subprocess.Popen(
            [THREADLINE, "serve", "--port", str(port)], env=env, stderr=subprocess.PIPE, text=True
        )
        try:
            assert server.stderr is not None
            for line in server.stderr:  # blocks until the server says it is up (or exits)
                if "Uvicorn running on" in line:
                    break
            else:
                pytest.fail("server exited before starting")
            base = f"http://127.0.0.1:{port}"
            assert httpx.get(f"{base}/readyz").json() == {"status": "ready"}
            created = subprocess.run([THREADLINE, "orgs", "create", "Live"], env=env, capture_output=True, text=True)
            secret = first_group(r"(tl_\S+)", created.stdout)
            me = httpx.get(f"{base}/v1/me", headers={"Authorization": f"Bearer {secret}"})
            assert me.status_code == 200 and me.json()["organization"]["slug"] == "live"
        finally:
            server.terminate()
            server.wait(timeout=30)


def test_prompt_files_are_checked_with_file_and_line(tmp_path: Path, cli_env: dict[str, str]) -> None:
    (tmp_path / "good.yaml").write_text("name: good\ndescription: Fine\nmessages:\n  - {role: user, content: Hi}\n")
    (tmp_path / "bad.yaml").write_text("name: bad\ndescription: Broken\nmessages:\n  - {role: robot, content: Hi}\n")
    checked = cli(cli_env, "prompts", "check", str(tmp_path))
    assert checked.returncode == 1
    assert f"{tmp_path / 'bad.yaml'}:4:" in checked.stdout and "robot" in checked.stdout
    (tmp_path / "bad.yaml").unlink()
    assert cli(cli_env, "prompts", "check", str(tmp_path)).returncode == 0


def test_an_agent_is_imported_from_a_chatmd_file(tmp_path: Path, cli_env: dict[str, str]) -> None:
    cli(cli_env, "migrate")
    cli(cli_env, "orgs", "create", "ChatMD Importers")
    path = tmp_path / "web-helper.chatmd"
    path.write_text(
        '<config model="gpt-test"/>\n<system>You read web pages for people. Quote them.</system>\n'
        '<tool name="webpage_to_markdown"/>\n<tool name="apply_patch"/>\n'
    )
    imported = cli(cli_env, "agents", "import", str(path), "--org", "chatmd-importers")
    assert imported.returncode == 0, imported.stderr
    assert "agent web-helper" in imported.stdout and "1 tool(s), model gpt-test" in imported.stdout
    assert "apply_patch" in imported.stderr
    broken = tmp_path / "broken.chatmd"
    broken.write_text("<system>unclosed\n")
    failed = cli(cli_env, "agents", "import", str(broken), "--org", "chatmd-importers")
    assert failed.returncode == 1 and f"{broken}:1" in failed.stderr


async def test_a_command_opens_only_the_resources_it_uses_and_closes_them(settings: Settings) -> None:
    container = Container()
    container.settings.override(providers.Object(settings))
    create = await container.create_organization.async_()  # as a command asks for its use case
    created = await create.execute(CreateOrganizationCommand(name="Opens little", slug=None))
    assert created.organization.slug == "opens-little"

    opened = {name for name, p in container.providers.items() if isinstance(p, providers.Resource) and p.initialized}
    assert opened == {"database"}  # no model client, tracer, MCP sessions, run executor or prompt watch
    await close_resources(container)
    assert not container.database.initialized


def test_worker_mode_needs_postgresql_and_says_so(cli_env: dict[str, str]) -> None:
    worker = cli(cli_env, "worker")
    assert worker.returncode == 1
    assert "THREADLINE_EXECUTOR=queue" in worker.stderr and "Traceback" not in worker.stderr

    queue_on_sqlite = subprocess.run(
        [THREADLINE, "serve"],
        env=cli_env | {"THREADLINE_EXECUTOR": "queue", "THREADLINE_DATABASE_URL": "sqlite+aiosqlite:///never.db"},
        capture_output=True,
        text=True,
    )
    assert queue_on_sqlite.returncode == 2
    assert "THREADLINE_EXECUTOR: `queue` needs PostgreSQL" in queue_on_sqlite.stderr
    assert "Traceback" not in queue_on_sqlite.stderr
