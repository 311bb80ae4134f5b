"""Schemathesis against a real `threadline serve` on the suite's database (SQLite, or PostgreSQL when the suite
runs on it): every operation of /openapi.json, through its examples, coverage, fuzzing and stateful phases,
within a time budget. No server error, no response outside its schema, no status code the schema does not
list. MCP servers the run names are a closed loopback port (so 502 is an expected answer); see the hooks."""

import asyncio
import contextlib
import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from dependency_injector import providers

from application.use_cases.organizations import CreateOrganizationCommand
from infrastructure.container import Container
from infrastructure.persistence import migrations
from infrastructure.resources import close_resources
from infrastructure.settings import Settings
from tests.databases import backend, fresh_database
from tests.servers import threadline_serve

BIN = Path(sys.executable).parent
REPOSITORY = Path(__file__).resolve().parents[2]
SECRET_KEY = "schemathesis test key"
BUDGET_SECONDS = int(os.environ.get("THREADLINE_SCHEMATHESIS_SECONDS", "60"))
"""The time schemathesis may spend on its phases; the report says how many cases fit."""
CHECKS = "not_a_server_error,status_code_conformance,response_schema_conformance"
CONFIG = """
[checks.not_a_server_error]
# 502 and 504 are the documented answers when an integration's MCP server fails (here, refuses).
expected-statuses = ["2xx", "3xx", "4xx", "502", "504"]
"""


@contextlib.contextmanager
def _closed_port() -> Iterator[str]:
    """A loopback port held but not listening: connections to it are refused at once."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}/mcp"


async def _admin_key(url: str, data_dir: Path) -> str:
    await asyncio.to_thread(migrations.upgrade, url)
    container = Container()
    settings = Settings(_env_file=None, database_url=url, secret_key=SECRET_KEY, data_dir=data_dir)
    container.settings.override(providers.Object(settings))
    try:
        created = await (await container.create_organization.async_()).execute(
            CreateOrganizationCommand(name="Fuzzed", slug=None)
        )
    finally:
        await close_resources(container)
    return created.admin_key_plaintext


async def _schemathesis(base_url: str, key: str, key_id: str, closed_url: str, directory: Path) -> dict[str, Any]:
    config = directory / "schemathesis.toml"
    config.write_text(CONFIG)
    report = directory / "report.json"
    env = os.environ | {
        "SCHEMATHESIS_HOOKS": "tests.e2e.schemathesis_hooks",
        "PYTHONPATH": os.pathsep.join([str(REPOSITORY), os.environ.get("PYTHONPATH", "")]),
        "THREADLINE_FUZZ_CLOSED_URL": closed_url,
        "THREADLINE_FUZZ_KEY_ID": key_id,
    }
    process = await asyncio.create_subprocess_exec(
        str(BIN / "st"),
        "--config-file",
        str(config),
        "--no-color",
        "run",
        f"{base_url}/openapi.json",
        "--header",
        f"Authorization: Bearer {key}",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--checks",
        CHECKS,
        "--max-time",
        str(BUDGET_SECONDS),
        "--workers",
        "1",
        "--seed",
        os.environ.get("THREADLINE_SCHEMATHESIS_SEED", "20261123"),
        "--generation-database",
        "none",
        "--report",
        "json",
        "--report-json-path",
        str(report),
        env=env,
        cwd=directory,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), BUDGET_SECONDS + 180)
    (directory / "schemathesis.txt").write_bytes(output)
    assert report.exists(), output.decode(errors="replace")[-5000:]
    result: dict[str, Any] = json.loads(report.read_text())
    result["output"] = output.decode(errors="replace")
    return result


@pytest.fixture
def database(tmp_path: Path) -> Iterator[str]:
    with fresh_database(tmp_path) as url:
        yield url


async def test_schemathesis_finds_no_server_error_schema_violation_or_undocumented_status(
    database: str, tmp_path: Path
) -> None:
    key = await _admin_key(database, tmp_path / "data")
    env = os.environ | {
        "THREADLINE_DATABASE_URL": database,
        "THREADLINE_DATABASE_POOL_SIZE": "5",
        "THREADLINE_SECRET_KEY": SECRET_KEY,
        "THREADLINE_DATA_DIR": str(tmp_path / "data"),
        "THREADLINE_MCP_ALLOWED_NETWORKS": "127.0.0.0/8",
        "THREADLINE_LOG_FORMAT": "text",
    }
    with _closed_port() as closed_url:
        async with threadline_serve(env, tmp_path) as (base_url, _process):
            async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {key}"}) as client:
                keys = (await client.get("/v1/api-keys")).json()["data"]
            result = await _schemathesis(base_url, key, keys[0]["id"], closed_url, tmp_path)
    cases = result["test_cases"]
    print(
        f"schemathesis on {backend()}: {result['operations']['tested']} operations, {cases['generated']} cases, "
        f"{cases['unique_failures']} failures, {len(result['errors'])} errors, {result['running_time']:.0f} s; "
        f"phases {json.dumps({name: phase['status'] for name, phase in result['phases'].items()})}"
    )
    summary = result["output"][result["output"].find("= FAILURES =") :][:20000]
    assert result["failures"] == [], summary
    assert result["errors"] == [], summary
    assert result["operations"]["tested"] == result["operations"]["total"]
    assert all(phase["status"] in ("success", "skip") for phase in result["phases"].values()), result["phases"]
    assert result["phases"]["stateful"]["status"] == "success", result["phases"]
