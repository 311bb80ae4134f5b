"""The operator's MCP servers file is watched: a server added while Threadline runs can be picked by an
integration and used at once, one removed is refused at once, and a broken edit keeps the servers read last."""

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from infrastructure.container import Container
from tests.conftest import Tenant
from tests.mcp_servers import everything


@pytest.fixture
def servers_file(container: Container) -> Iterator[Path]:
    """The session's servers file, put back as it was after the test."""
    path = container.settings().mcp_servers_file
    assert path is not None
    before = path.read_text()
    yield path
    path.write_text(before)


def write(path: Path, text: str) -> None:
    path.write_text(text)


def servers_of(path: Path) -> dict[str, object]:
    servers: dict[str, object] = json.loads(path.read_text())["servers"]
    return servers


async def test_a_server_added_to_the_file_is_usable_at_once_and_one_removed_is_refused(
    client: httpx.AsyncClient, tenant: Tenant, servers_file: Path
) -> None:
    everything.require_everything()
    body = {"name": "Late", "transport": "stdio", "server": "late-everything"}
    refused = await client.post("/v1/mcp-integrations", json=body, headers=tenant.admin)
    assert refused.status_code == 422, refused.text

    servers = servers_of(servers_file)
    command, args = everything.stdio_command()
    write(servers_file, json.dumps({"servers": servers | {"late-everything": {"command": command, "args": args}}}))
    created = await client.post("/v1/mcp-integrations", json=body, headers=tenant.admin)
    assert created.status_code == 201, created.text
    tools = await client.get(f"/v1/mcp-integrations/{created.json()['id']}/tools", headers=tenant.admin)
    assert tools.status_code == 200, tools.text
    assert "echo" in {t["name"] for t in tools.json()["data"]}

    write(servers_file, "{half written")  # a broken edit: the servers read last stay
    still = await client.post("/v1/mcp-integrations", json=body | {"name": "Late 2"}, headers=tenant.admin)
    assert still.status_code == 201, still.text

    write(servers_file, json.dumps({"servers": servers}))
    gone = await client.post("/v1/mcp-integrations", json=body | {"name": "Late 3"}, headers=tenant.admin)
    assert gone.status_code == 422, gone.text
    assert "late-everything" in gone.json()["detail"]
