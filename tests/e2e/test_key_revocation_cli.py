"""A key revoked by the operator's command line, another process on the same database, is refused by the
server's very next request (on SQLite too, where no notice travels between processes)."""

import asyncio
import os
import sys
from pathlib import Path

import httpx

from infrastructure.settings import Settings
from tests.conftest import Tenant

THREADLINE = Path(sys.executable).with_name("threadline")


async def test_a_key_revoked_by_the_command_line_is_refused_by_the_next_request(
    client: httpx.AsyncClient, tenant: Tenant, settings: Settings
) -> None:
    created = (await client.post("/v1/api-keys", json={"name": "laptop"}, headers=tenant.admin)).json()
    key = {"Authorization": f"Bearer {created['key']}"}
    assert (await client.get("/v1/me", headers=key)).status_code == 200  # verified: this process knows it now

    env = os.environ | {
        "THREADLINE_DATABASE_URL": settings.database_url,
        "THREADLINE_SECRET_KEY": "test secret key",
        "THREADLINE_LOG_FORMAT": "text",
    }
    process = await asyncio.create_subprocess_exec(
        str(THREADLINE), "keys", "revoke", created["id"], "--org", tenant.slug, env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    assert process.returncode == 0, out

    refused = await client.get("/v1/me", headers=key)
    assert refused.status_code == 401, refused.text
    assert (await client.get("/v1/me", headers=tenant.admin)).status_code == 200
