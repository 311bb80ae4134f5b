"""/mcp answers what the protocol asks of a server that declares `resources` (the organization's sources), and
reads the `Mcp-*` routing headers of 2026-07-28 requests as HTTP defines field values (whitespace around them
dropped)."""

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import Tenant
from tests.e2e.test_mcp_server import mcp_client, publish_agent

MODERN = "2026-07-28"


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_resource_templates_are_listed_and_an_unknown_resource_is_invalid_params(
    live_url: str, tenant: Tenant, mode: str
) -> None:
    async with mcp_client(live_url, tenant, mode=mode) as session:
        templates = (await session.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == [
            "threadline://sources/{source_id}",
            "threadline://threads/{thread_id}/sources",
            "threadline://agents/{agent_id}/sources",
        ]
        with pytest.raises(MCPError) as refused:
            await session.read_resource("threadline://nothing/here")
    assert refused.value.code == -32602
    assert refused.value.error.data == {"uri": "threadline://nothing/here"}


async def raw_post(live_url: str, headers: list[tuple[str, str]], body: dict[str, Any]) -> tuple[int, Any]:
    """A POST sent byte for byte as written (HTTP clients refuse whitespace around header values)."""
    where = urlsplit(live_url)
    payload = json.dumps(body).encode()
    lines = ["POST /mcp HTTP/1.1", f"Host: {where.netloc}", f"Content-Length: {len(payload)}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers]
    reader, writer = await asyncio.open_connection(where.hostname, where.port)
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    if b"chunked" in head.lower():
        chunks, rest_left = [], rest
        while rest_left:
            size_line, _, rest_left = rest_left.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                break
            chunks.append(rest_left[:size])
            rest_left = rest_left[size + 2 :]
        rest = b"".join(chunks)
    text = rest.decode()
    if text.startswith("event:") or text.startswith("data:"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return status, json.loads(text)


async def test_whitespace_around_the_mcp_name_header_is_not_part_of_the_name(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant
) -> None:
    await publish_agent(client, tenant)
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "prompts/get",
        "params": {"name": "echo-bot", "arguments": {}, "_meta": meta},
    }
    common = [
        ("Authorization", tenant.admin["Authorization"]),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "prompts/get"),
    ]
    status, answer = await raw_post(live_url, [*common, ("Mcp-Name", "echo-bot \t")], body)
    assert status == 200, answer
    assert answer["result"]["messages"], answer

    status, answer = await raw_post(live_url, [*common, ("Mcp-Name", "other-bot ")], body)
    assert status == 400 and answer["error"]["code"] == -32020
