"""A revoked API key is refused by every process of a deployment, although each keeps the keys it verified:
two app instances on one PostgreSQL database (this test's app, and `threadline serve` in a process of its own),
a key revoked through either is refused by the other long before its verified keys would expire."""

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from uuid import UUID

import httpx
import pytest
from sqlalchemy import func, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

from infrastructure.persistence.tables import api_keys
from infrastructure.security.key_revocations import CHANNEL
from infrastructure.settings import Settings
from tests.conftest import Tenant
from tests.databases import backend
from tests.servers import free_port

pytestmark = pytest.mark.skipif(
    backend() != "postgresql", reason="several processes on one database: PostgreSQL (THREADLINE_TEST_POSTGRES_URL)"
)

THREADLINE = Path(sys.executable).with_name("threadline")
PATIENCE_SECONDS = 10.0
"""How long the other process may take to refuse the key: well under the time it keeps a verified key (30 s)."""


@pytest.fixture(scope="module")
async def other_process(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """`threadline serve` on the suite's database: another process of the same deployment."""
    assert settings.api_key_cache_seconds > PATIENCE_SECONDS
    port = free_port()
    env = os.environ | {
        "THREADLINE_DATABASE_URL": settings.database_url,
        "THREADLINE_DATABASE_POOL_SIZE": "2",
        "THREADLINE_SECRET_KEY": "test secret key",
        "THREADLINE_DATA_DIR": str(tmp_path_factory.mktemp("other-process")),
        "THREADLINE_LOG_FORMAT": "text",
    }
    process = await asyncio.create_subprocess_exec(
        str(THREADLINE), "serve", "--no-migrate", "--port", str(port), env=env, stderr=asyncio.subprocess.PIPE
    )
    assert process.stderr is not None
    log: list[str] = []
    drain: asyncio.Task[bytes] | None = None
    try:
        while line := (await asyncio.wait_for(process.stderr.readline(), 60)).decode():
            log.append(line)
            if "Uvicorn running on" in line:
                break
        else:
            pytest.fail("threadline serve exited before it started:\n" + "".join(log))
        drain = asyncio.create_task(process.stderr.read())  # the log must never fill its pipe
        yield f"http://127.0.0.1:{port}"
    finally:
        if process.returncode is None:
            process.terminate()
            await asyncio.wait_for(process.wait(), 30)
        if drain is not None:
            with contextlib.suppress(Exception):
                await drain


async def _new_key(client: httpx.AsyncClient, tenant: Tenant) -> tuple[str, dict[str, str]]:
    created = (await client.post("/v1/api-keys", json={"name": "shared"}, headers=tenant.admin)).json()
    return created["id"], {"Authorization": f"Bearer {created['key']}"}


async def _refused_within(client: httpx.AsyncClient, headers: dict[str, str]) -> float:
    """Seconds until `client`'s server refuses the key (asks again at once until it does)."""
    started = time.monotonic()
    while (status := (await client.get("/v1/me", headers=headers)).status_code) == 200:
        assert time.monotonic() - started < PATIENCE_SECONDS, "the revoked key is still accepted"
    assert status == 401
    return time.monotonic() - started


async def test_a_key_revoked_in_another_process_is_refused_here(
    client: httpx.AsyncClient, tenant: Tenant, other_process: str
) -> None:
    async with httpx.AsyncClient(base_url=other_process) as other:
        key_id, headers = await _new_key(client, tenant)
        assert (await client.get("/v1/me", headers=headers)).status_code == 200  # verified here, and kept
        assert (await other.get("/v1/me", headers=headers)).status_code == 200

        revoked = await other.post(f"/v1/api-keys/{key_id}/revoke", headers=tenant.admin)
        assert revoked.status_code == 200

        assert (await other.get("/v1/me", headers=headers)).status_code == 401
        await _refused_within(client, headers)


async def test_a_key_revoked_here_is_refused_by_the_other_process(
    client: httpx.AsyncClient, tenant: Tenant, other_process: str
) -> None:
    async with httpx.AsyncClient(base_url=other_process) as other:
        key_id, headers = await _new_key(client, tenant)
        assert (await other.get("/v1/me", headers=headers)).status_code == 200  # verified there, and kept
        assert (await client.get("/v1/me", headers=headers)).status_code == 200

        assert (await client.post(f"/v1/api-keys/{key_id}/revoke", headers=tenant.admin)).status_code == 200

        assert (await client.get("/v1/me", headers=headers)).status_code == 401
        await _refused_within(other, headers)


async def _listeners(connection: AsyncConnection) -> set[int]:
    """The server processes of this database's connections that listen to API key revocations."""
    await connection.rollback()  # a fresh snapshot of pg_stat_activity
    found = await connection.execute(
        text(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE :listen AND state = 'idle'"
        ),
        {"listen": f"%LISTEN {CHANNEL}%"},  # (a process listens to all its channels in one statement)
    )
    return {int(pid) for pid in found.scalars()}


async def test_keys_kept_while_revocations_could_not_be_heard_are_read_again(
    client: httpx.AsyncClient, tenant: Tenant, settings: Settings
) -> None:
    """Revocations committed while the listening connection was down are never announced: once it listens
    again, every key is read afresh."""
    key_id, headers = await _new_key(client, tenant)
    assert (await client.get("/v1/me", headers=headers)).status_code == 200  # verified, and kept
    engine = create_async_engine(settings.database_url, poolclass=NullPool)
    try:
        async with engine.connect() as admin:
            before = await _listeners(admin)
            assert before
            for pid in before:
                await admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            # revoked behind the processes' backs: no notice is sent
            await admin.execute(update(api_keys).where(api_keys.c.id == UUID(key_id)).values(revoked_at=func.now()))
            await admin.commit()
            while len((now := await _listeners(admin)) - before) < len(before):  # noqa: ASYNC110 - they reconnect
                await asyncio.sleep(0.01)
            assert not now & before
    finally:
        await engine.dispose()

    assert (await client.get("/v1/me", headers=headers)).status_code == 401
