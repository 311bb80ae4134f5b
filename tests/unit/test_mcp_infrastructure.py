import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

import pytest

from application.errors import UrlNotAllowed
from domain.ids import IntegrationId
from infrastructure.mcp_client.catalog_cache import CatalogCache
from infrastructure.mcp_client.operator_servers import OperatorServerRegistry, OperatorServersError
from infrastructure.outbound.guard import NetworkPolicy
from infrastructure.security.secret_box import FernetSecretBox, SecretUnreadable

NOW = datetime(2026, 11, 22, tzinfo=UTC)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/mcp",
        "http://localhost/mcp",
        "http://10.0.0.5/mcp",
        "http://192.168.1.1/",
        "http://172.16.3.4/",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/mcp",
        "http://[::ffff:127.0.0.1]/mcp",
        "http://0.0.0.0/",
        "http://100.64.0.1/",
        "ftp://example.org/",
        "http://user:secret@8.8.8.8/",
    ],
)
async def test_the_guard_refuses_non_public_destinations(url: str) -> None:
    with pytest.raises(UrlNotAllowed):
        await NetworkPolicy().check_url(url)


async def test_the_guard_allows_public_addresses_and_networks_the_operator_allows() -> None:
    await NetworkPolicy().check_url("https://8.8.8.8/mcp")
    await NetworkPolicy(["127.0.0.0/8"]).check_url("http://127.0.0.1:9000/mcp")
    with pytest.raises(UrlNotAllowed):
        await NetworkPolicy(["127.0.0.0/8"]).check_url("http://10.0.0.1/mcp")


def test_credentials_survive_a_key_rotation() -> None:
    old = FernetSecretBox(["old passphrase"])
    sealed = old.seal("token-123")
    assert "token-123" not in sealed
    both = FernetSecretBox(["new passphrase", "old passphrase"])
    assert both.open(sealed) == "token-123"
    rotated = both.rotate(sealed)
    assert FernetSecretBox(["new passphrase"]).open(rotated) == "token-123"
    with pytest.raises(SecretUnreadable):
        FernetSecretBox(["new passphrase"]).open(sealed)


def test_operator_servers_come_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "servers.yaml"
    path.write_text("servers:\n  files:\n    command: node\n    args: [server.js, stdio]\n    env: {A: 1}\n")
    registry = OperatorServerRegistry.from_file(path)
    assert registry.names() == ["files"]
    parameters = registry.parameters("files")
    assert parameters is not None and parameters.args == ["server.js", "stdio"] and parameters.env == {"A": "1"}

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"servers": {"x": {"args": []}}}))
    with pytest.raises(OperatorServersError, match="needs a `command`"):
        OperatorServerRegistry.from_file(bad)
    broken = tmp_path / "broken.yaml"
    broken.write_text("servers: [unclosed")
    with pytest.raises(OperatorServersError, match="cannot read"):
        OperatorServerRegistry.from_file(broken)


def test_the_catalog_cache_expires_and_ignores_answers_overtaken_by_a_change() -> None:
    now = [0.0]
    cache = CatalogCache(clock=lambda: now[0])
    integration = IntegrationId(uuid4())
    generation = cache.generation(integration, "tools")
    cache.put(integration, "tools", NOW, ["a"], ttl=10, generation=generation)
    assert cache.get(integration, "tools", NOW) == ["a"]
    assert cache.get(integration, "tools", NOW + timedelta(seconds=1)) is None  # another version
    now[0] = 11
    assert cache.get(integration, "tools", NOW) is None

    started = cache.generation(integration, "tools")
    cache.invalidate(integration, "tools")  # a change arrives while a fetch is under way
    cache.put(integration, "tools", NOW, ["stale"], ttl=10, generation=started)
    assert cache.get(integration, "tools", NOW) is None

    cache.put(integration, "resource_templates", NOW, ["t"], ttl=10, generation=0)
    cache.invalidate(integration, "resources")
    assert cache.get(integration, "resource_templates", NOW) is None
