"""/mcp and the integrations API against a careless or hostile client: sessions belong to the key that opened
them, connection tests are an admin's, bad input is the client's error (invalid params), not the server's."""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from domain.messages import TEXT_MAX
from tests.conftest import MakeTenant, Tenant, member_headers
from tests.e2e.test_mcp_server import create_template, mcp_client, publish_agent
from tests.fakes.mcp_server import FakeMcpServer

HANDSHAKE_VERSION = "2025-11-25"
ACCEPT = {"Accept": "application/json, text/event-stream"}


# -- sessions are bound to the key that opened them -----------------------------------------------------


class HandshakeSession:
    """A handshake-era (stateful) MCP session over plain HTTP, opened with one key."""

    def __init__(self, http: httpx.AsyncClient, url: str, opener: dict[str, str]) -> None:
        self.http, self.url, self.opener = http, url, opener
        self.id = ""

    def headers(self, key: dict[str, str]) -> dict[str, str]:
        return key | ACCEPT | {"Mcp-Session-Id": self.id, "Mcp-Protocol-Version": HANDSHAKE_VERSION}

    async def open(self) -> None:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "probe", "version": "1"},
            },
        }
        response = await self.http.post(self.url, json=init, headers=self.opener | ACCEPT)
        assert response.status_code == 200, response.text
        self.id = response.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        done = await self.http.post(self.url, json=initialized, headers=self.headers(self.opener))
        assert done.status_code == 202, done.text

    async def list_tools(self, key: dict[str, str]) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        return await self.http.post(self.url, json=body, headers=self.headers(key))


@pytest.fixture
async def session(live_url: str, tenant: Tenant) -> AsyncIterator[HandshakeSession]:
    async with httpx.AsyncClient(timeout=30) as http:
        opened = HandshakeSession(http, f"{live_url}/mcp", tenant.admin)
        await opened.open()
        yield opened
        await http.delete(opened.url, headers=opened.headers(tenant.admin))


async def test_the_key_that_opened_a_session_uses_it(session: HandshakeSession, tenant: Tenant) -> None:
    listed = await session.list_tools(tenant.admin)
    assert listed.status_code == 200 and '"tools"' in listed.text


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
@pytest.mark.parametrize("other", ["another organization", "another key of the organization"])
async def test_a_session_is_not_found_with_any_other_key(
    client: httpx.AsyncClient,
    session: HandshakeSession,
    tenant: Tenant,
    make_tenant: MakeTenant,
    method: str,
    other: str,
) -> None:
    if other == "another organization":
        key = (await make_tenant("Intruder")).admin
    else:
        created = await client.post("/v1/api-keys", json={"name": "second admin"}, headers=tenant.admin)
        key = {"Authorization": f"Bearer {created.json()['key']}"}
    if method == "POST":
        status = (await session.list_tools(key)).status_code
    else:  # a GET would open the session's stream of list_changed notifications; a DELETE would end it
        async with session.http.stream(method, session.url, headers=session.headers(key)) as response:
            status = response.status_code
    assert status == 404
    still = await session.list_tools(tenant.admin)
    assert still.status_code == 200, still.text


# -- connection tests are an admin's -------------------------------------------------------------------


async def test_a_member_may_not_test_an_integration(
    client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer
) -> None:
    body = {"name": "Memo", "url": mcp_server.url}
    integration = (await client.post("/v1/mcp-integrations", json=body, headers=tenant.admin)).json()
    url = f"/v1/mcp-integrations/{integration['id']}/test"
    refused = await client.post(url, headers=await member_headers(client, tenant))
    assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied", refused.text
    unchanged = (await client.get(f"/v1/mcp-integrations/{integration['id']}", headers=tenant.admin)).json()
    assert unchanged["connection_status"] == "unknown" and unchanged["last_checked_at"] is None
    assert (await client.post(url, headers=tenant.admin)).json()["ok"] is True


# -- bad input over /mcp -------------------------------------------------------------------------------


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def test_an_over_long_input_is_invalid_params_logged_at_info(
    client: httpx.AsyncClient, live_url: str, tenant: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    await publish_agent(client, tenant)
    async with mcp_client(live_url, tenant) as session:
        with pytest.raises(MCPError) as refused:
            await session.call_tool("echo-bot", {"input": "x" * (TEXT_MAX + 1)})
    assert refused.value.code == types.INVALID_PARAMS
    assert f"at most {TEXT_MAX} characters" in refused.value.message
    assert errors_logged(caplog) == []
    assert any(r.levelno == logging.INFO and f"at most {TEXT_MAX}" in r.getMessage() for r in caplog.records), (
        caplog.text
    )
    runs = (await client.get("/v1/runs", headers=tenant.admin)).json()["data"]
    assert runs == []


BRIEF_ME = types.PromptReference(type="ref/prompt", name="brief-me")
NUL_REQUESTS: dict[str, Callable[[Client], Awaitable[object]]] = {
    "agent input": lambda c: c.call_tool("echo-bot", {"input": "a\x00b"}),
    "template argument": lambda c: c.call_tool("brief_me", {"topic": "MCP\x00"}),
    "argument name": lambda c: c.call_tool("echo-bot", {"input": "hi", "note\x00": "x"}),
    "prompt argument": lambda c: c.get_prompt("brief-me", {"topic": "\x00"}),
    "completion": lambda c: c.complete(BRIEF_ME, {"name": "topic", "value": "Q\x00"}),
}


@pytest.mark.parametrize("request_of", NUL_REQUESTS.values(), ids=NUL_REQUESTS.keys())
async def test_a_nul_character_is_refused_as_invalid_params(
    client: httpx.AsyncClient,
    live_url: str,
    tenant: Tenant,
    caplog: pytest.LogCaptureFixture,
    request_of: Callable[[Client], Awaitable[object]],
) -> None:
    await create_template(client, tenant, await publish_agent(client, tenant))
    async with mcp_client(live_url, tenant) as session:
        with pytest.raises(MCPError) as refused:
            await request_of(session)
    assert refused.value.code == types.INVALID_PARAMS
    assert "text must not contain the NUL character" in refused.value.message
    assert errors_logged(caplog) == []
    assert (await client.get("/v1/runs", headers=tenant.admin)).json()["data"] == []
