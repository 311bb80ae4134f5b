"""An unexpected error is a 500 {"error", "detail"}, and the client's connection stays usable."""

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest
from dependency_injector import providers

from infrastructure.container import Container
from tests.conftest import Tenant


class Exploding:
    async def execute(self, *_args: object) -> None:
        raise RuntimeError("boom")


@pytest.fixture
async def exploding_get_thread(container: Container) -> AsyncIterator[None]:
    container.get_thread.override(providers.Object(Exploding()))
    try:
        yield
    finally:
        container.get_thread.reset_override()


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, path: str, auth: str
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request on an open connection, and its response (read by Content-Length)."""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: {auth}\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines if line)}
    body = await reader.readexactly(int(headers["content-length"]))
    return int(status_line.split()[1]), headers, body


async def test_after_a_500_the_same_connection_serves_the_next_request(
    live_url: str, tenant: Tenant, exploding_get_thread: None, caplog: pytest.LogCaptureFixture
) -> None:
    url = urlsplit(live_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    auth = tenant.admin["Authorization"]
    try:
        with caplog.at_level(logging.ERROR):
            status, headers, body = await _exchange(
                reader, writer, url.netloc, "/v1/threads/0190a3c4-0000-7000-8000-000000000000", auth
            )
        assert status == 500 and headers.get("connection", "").lower() != "close"
        assert json.loads(body) == {
            "error": "InternalError",
            "detail": "an unexpected error occurred; it has been logged",
        }
        status, _, body = await _exchange(reader, writer, url.netloc, "/v1/me", auth)
        assert status == 200 and json.loads(body)["organization"]["slug"] == tenant.slug
    finally:
        writer.close()
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in logged] == [
        "unhandled error on GET /v1/threads/0190a3c4-0000-7000-8000-000000000000"
    ]
