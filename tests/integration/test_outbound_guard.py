"""The outbound guard against a name that rebinds: every outbound connection goes to an address the guard
checked for that connection, never to the one a later DNS answer names.

Only loopback is at hand, so the operator allows 127.0.0.1/32 and nothing else: 127.0.0.1 plays the
allowed destination (a real MCP server and web site that accept only the Host `rebind.test`) and 127.0.0.2,
on the same port, the denied one (a listener that records every connection). A DNS server written below
answers `rebind.test` with the allowed and the denied address in turn, as a rebinding attacker's does, and
the code under test resolves through it.
"""

import asyncio
import datetime
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from uuid import uuid4

import httpx
import httpx2
import mcp_types as types
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mcp.server import Server
from mcp.server.sse import SseServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from application.errors import McpConnectionFailed, ToolFailure, UrlNotAllowed
from application.ports.mcp import McpTarget, McpToolResult
from domain.ids import IntegrationId, OrgId
from domain.integrations import Transport
from infrastructure.mcp_client.connection import McpConnection, opened
from infrastructure.mcp_client.gateway import SdkMcpGateway
from infrastructure.mcp_client.operator_servers import OperatorServerRegistry
from infrastructure.native_tools.web_page import HttpWebPageReader
from infrastructure.outbound.guard import NetworkPolicy
from infrastructure.outbound.nameserver import NameserverResolver
from infrastructure.outbound.transport import guarded_httpx2_transport, guarded_httpx_transport
from tests.fakes.loopback import LoopbackServer

NAME = "rebind.test"
ALLOWED, DENIED = "127.0.0.1", "127.0.0.2"
CREDENTIAL = "Bearer integration-secret"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


# -- a DNS server whose answers alternate ---------------------------------------------------------


class RebindingNameServer(asyncio.DatagramProtocol):
    """Answers A queries for its names with its addresses in turn (TTL 0), AAAA queries with nothing,
    and any other name with NXDOMAIN."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.turns: list[tuple[str, ...]] = [(ALLOWED,)]
        self.given: list[str] = []
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)

    def answer(self, *addresses: str) -> None:
        """One address per answer, in turn."""
        self.turns = [(address,) for address in addresses]

    def answer_together(self, *addresses: str) -> None:
        """Every address in each answer."""
        self.turns = [addresses]

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        query_id, _flags, _count = struct.unpack_from("!3H", data)
        labels, offset = [], 12
        while data[offset]:
            labels.append(data[offset + 1 : offset + 1 + data[offset]].decode().lower())
            offset += 1 + data[offset]
        (record_type,) = struct.unpack_from("!H", data, offset + 1)
        question = data[12 : offset + 5]
        records = b""
        rcode = 0 if ".".join(labels) in self.names else 3
        addresses: tuple[str, ...] = ()
        if rcode == 0 and record_type == 1:
            addresses = self.turns[len(self.given) % len(self.turns)]
            self.given.append(",".join(addresses))
        # Each record: the name by a pointer to the question, type A, class IN, TTL 0, four bytes of address.
        records = b"".join(struct.pack("!HHHIH", 0xC00C, 1, 1, 0, 4) + socket.inet_aton(a) for a in addresses)
        header = struct.pack("!6H", query_id, 0x8180 | rcode, 1, len(addresses), 0, 0)
        assert self._transport is not None
        self._transport.sendto(header + question + records, addr)


@pytest.fixture
async def dns() -> AsyncIterator[tuple[RebindingNameServer, int]]:
    loop = asyncio.get_running_loop()
    transport, server = await loop.create_datagram_endpoint(
        lambda: RebindingNameServer({NAME, "other.test"}), local_addr=(ALLOWED, 0)
    )
    yield server, transport.get_extra_info("sockname")[1]
    transport.close()


@pytest.fixture
def policy(dns: tuple[RebindingNameServer, int]) -> NetworkPolicy:
    return NetworkPolicy([f"{ALLOWED}/32"], resolver=NameserverResolver(ALLOWED, dns[1], timeout_seconds=5))


@pytest.fixture
def names(dns: tuple[RebindingNameServer, int]) -> RebindingNameServer:
    return dns[0]


# -- the allowed destination and the denied one ---------------------------------------------------


class ConnectionRecorder:
    """A TCP listener that records each connection and closes it."""

    def __init__(self) -> None:
        self.connections: list[tuple[str, int]] = []
        self._server: asyncio.Server | None = None

    async def listen(self, host: str, port: int) -> "ConnectionRecorder":
        self._server = await asyncio.start_server(self._record, host, port)
        return self

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def _record(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections.append(writer.get_extra_info("peername"))
        writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@dataclass
class Destinations:
    port: int
    denied: ConnectionRecorder
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(path, Host header, Authorization header) of each request the allowed server received."""

    def url(self, path: str, host: str = NAME) -> str:
        return f"http://{host}:{self.port}{path}"

    @property
    def paths(self) -> list[str]:
        return [path for path, _, _ in self.requests]


def _mcp_server() -> Server[Any]:
    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {}}
        return types.ListToolsResult(tools=[types.Tool(name="where", description="Says where", input_schema=schema)])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="the allowed server")])

    return Server("allowed", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


def _allowed_site(destinations: Destinations) -> ASGIApp:
    # Like any MCP server protecting itself from rebinding, it answers only to its own name (and address).
    security = TransportSecuritySettings(
        allowed_hosts=[f"{NAME}:*", f"{ALLOWED}:*"], allowed_origins=[f"http://{NAME}:*", f"http://{ALLOWED}:*"]
    )
    server = _mcp_server()
    sse = SseServerTransport("/messages/", security_settings=security)

    async def handle_sse(request: Request) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return Response()

    def moved(location: str) -> Any:
        # Connection: close makes the client open a new connection, and so resolve again, for the next hop.
        return lambda request: Response(status_code=307, headers={"Location": location, "Connection": "close"})

    async def to_rebind(request: Request) -> Response:
        return RedirectResponse(destinations.url("/page"), status_code=302)

    app = server.streamable_http_app(
        transport_security=security,
        custom_starlette_routes=[
            Route("/sse", handle_sse),
            # The SDK annotates these as list[Route], but hands them on to Starlette, which takes any route.
            Mount("/messages/", app=sse.handle_post_message),  # type: ignore[list-item]
            Route("/moved-mcp", moved("/mcp"), methods=["GET", "POST", "DELETE"]),
            Route("/moved-sse", moved("/sse")),
            Route("/page", lambda request: PlainTextResponse("the allowed page")),
            Route("/to-rebind", to_rebind),
        ],
    )

    async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            authorization = headers.get(b"authorization")
            destinations.requests.append(
                (scope["path"], headers[b"host"].decode(), authorization.decode() if authorization else None)
            )
        await app(scope, receive, send)

    return recorded


@pytest.fixture
async def destinations() -> AsyncIterator[Destinations]:
    destinations = Destinations(port=0, denied=ConnectionRecorder())
    async with LoopbackServer(_allowed_site(destinations)) as allowed:
        destinations.port = allowed.port
        await destinations.denied.listen(DENIED, allowed.port)
        yield destinations
        await destinations.denied.close()


@pytest.fixture
async def gateway(policy: NetworkPolicy) -> AsyncIterator[SdkMcpGateway]:
    gateway = SdkMcpGateway(servers=OperatorServerRegistry({}), outbound=policy)
    yield gateway
    await gateway.close()


MCP_PATHS = {Transport.STREAMABLE_HTTP: ("/mcp", "/moved-mcp"), Transport.SSE: ("/sse", "/moved-sse")}


def _target(url: str, transport: Transport) -> McpTarget:
    return McpTarget(
        integration_id=IntegrationId(uuid4()),
        org_id=OrgId(uuid4()),
        transport=transport,
        version=datetime.datetime.now(datetime.UTC),
        url=url,
        headers={"Authorization": CREDENTIAL},
        timeout_seconds=10,
    )


# -- MCP integrations -----------------------------------------------------------------------------


@pytest.mark.parametrize("transport", [Transport.STREAMABLE_HTTP, Transport.SSE])
async def test_an_integration_reaches_its_server_through_the_address_the_guard_checked(
    gateway: SdkMcpGateway, names: RebindingNameServer, destinations: Destinations, transport: Transport
) -> None:
    target = _target(destinations.url(MCP_PATHS[transport][0]), transport)

    result = await gateway.call_tool(target, "where", {})

    assert isinstance(result, McpToolResult) and result.parts[0].text == "the allowed server"
    assert {host for _, host, _ in destinations.requests} == {f"{NAME}:{destinations.port}"}
    assert {authorization for _, _, authorization in destinations.requests} == {CREDENTIAL}
    assert set(names.given) == {ALLOWED}


@pytest.mark.parametrize("transport", [Transport.STREAMABLE_HTTP, Transport.SSE])
async def test_an_integration_whose_name_rebinds_after_the_check_never_reaches_the_denied_address(
    gateway: SdkMcpGateway, names: RebindingNameServer, destinations: Destinations, transport: Transport
) -> None:
    names.answer(ALLOWED, DENIED)  # the creation-time check hears the first, the connection the second
    target = _target(destinations.url(MCP_PATHS[transport][0]), transport)

    with pytest.raises(McpConnectionFailed):
        await gateway.call_tool(target, "where", {})

    assert destinations.denied.connections == []  # so the credential never went there
    assert destinations.requests == []
    assert DENIED in names.given


@pytest.mark.parametrize("transport", [Transport.STREAMABLE_HTTP, Transport.SSE])
async def test_a_redirect_on_a_new_connection_is_checked_again(
    policy: NetworkPolicy, names: RebindingNameServer, destinations: Destinations, transport: Transport
) -> None:
    names.answer(ALLOWED, DENIED)  # the first connection hears the first, the redirected one the second
    first_hop = MCP_PATHS[transport][1]
    connection = McpConnection(_target(destinations.url(first_hop), transport), None, policy, lambda kind: None)

    with pytest.raises(McpConnectionFailed):
        async with opened(connection):
            pass

    assert destinations.denied.connections == []
    assert set(destinations.paths) == {first_hop}  # redirected every time, never served
    assert names.given[:2] == [ALLOWED, DENIED]


@pytest.mark.parametrize("transport", [Transport.STREAMABLE_HTTP, Transport.SSE])
async def test_a_redirect_to_a_checked_address_is_followed(
    policy: NetworkPolicy, destinations: Destinations, transport: Transport
) -> None:
    plain, moved = MCP_PATHS[transport]
    connection = McpConnection(_target(destinations.url(moved), transport), None, policy, lambda kind: None)

    async with opened(connection):
        tools = await connection.request(lambda client: client.list_tools(), doing="listing tools")

    assert [tool.name for tool in tools.tools] == ["where"]
    assert destinations.paths[:2] == [moved, plain]


@pytest.mark.parametrize("transport", [Transport.STREAMABLE_HTTP, Transport.SSE])
async def test_proxies_named_by_the_environment_are_not_used(
    destinations: Destinations, transport: Transport, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = await ConnectionRecorder().listen(ALLOWED, 0)
    for variable in PROXY_VARIABLES:
        monkeypatch.setenv(variable, f"http://{ALLOWED}:{proxy.port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    policy = NetworkPolicy([f"{ALLOWED}/32"])
    gateway = SdkMcpGateway(servers=OperatorServerRegistry({}), outbound=policy)
    target = _target(destinations.url(MCP_PATHS[transport][0], host=ALLOWED), transport)

    try:
        result = await gateway.call_tool(target, "where", {})
        page = await HttpWebPageReader(policy, timeout_seconds=5).read(destinations.url("/page", host=ALLOWED))
    finally:
        await gateway.close()
        await proxy.close()

    assert proxy.connections == []
    assert isinstance(result, McpToolResult) and result.parts[0].text == "the allowed server"
    assert page.text == "the allowed page"


# -- the web page reader --------------------------------------------------------------------------


async def test_a_page_is_read_through_the_address_the_guard_checked(
    policy: NetworkPolicy, destinations: Destinations
) -> None:
    page = await HttpWebPageReader(policy, timeout_seconds=5).read(destinations.url("/page"))

    assert page.text == "the allowed page"
    assert destinations.requests == [("/page", f"{NAME}:{destinations.port}", None)]


async def test_a_page_whose_name_rebinds_after_the_check_is_not_read_from_the_denied_address(
    policy: NetworkPolicy, names: RebindingNameServer, destinations: Destinations
) -> None:
    names.answer(ALLOWED, DENIED)

    with pytest.raises(ToolFailure, match=rf"{NAME} resolves to {DENIED}, a non-public address"):
        await HttpWebPageReader(policy, timeout_seconds=5).read(destinations.url("/page"))

    assert destinations.denied.connections == []
    assert destinations.requests == []


async def test_a_redirect_to_a_name_that_rebinds_is_not_followed_to_the_denied_address(
    policy: NetworkPolicy, names: RebindingNameServer, destinations: Destinations
) -> None:
    names.answer(ALLOWED, DENIED)  # the redirect's check hears the first answer, its connection the second

    with pytest.raises(ToolFailure, match=rf"{NAME} resolves to {DENIED}"):
        await HttpWebPageReader(policy, timeout_seconds=5).read(destinations.url("/to-rebind", host=ALLOWED))

    assert destinations.denied.connections == []
    assert destinations.paths == ["/to-rebind"]
    assert names.given == [ALLOWED, DENIED]


async def test_a_name_with_several_addresses_is_reached_at_the_first_that_accepts(
    dns: tuple[RebindingNameServer, int], destinations: Destinations
) -> None:
    names, port = dns
    names.answer_together("127.0.0.3", ALLOWED)  # nothing listens on the first
    loopback = NetworkPolicy(["127.0.0.0/8"], resolver=NameserverResolver(ALLOWED, port))

    page = await HttpWebPageReader(loopback, timeout_seconds=5).read(destinations.url("/page"))

    assert page.text == "the allowed page"


async def test_a_pooled_connection_is_reused_without_resolving_again(
    policy: NetworkPolicy, names: RebindingNameServer, destinations: Destinations
) -> None:
    clients = (
        httpx.AsyncClient(transport=guarded_httpx_transport(policy, ssl_context=httpx.create_ssl_context())),
        httpx2.AsyncClient(transport=guarded_httpx2_transport(policy, ssl_context=httpx2.create_ssl_context())),
    )
    for client in clients:
        async with client:
            for _ in range(5):
                assert (await client.get(destinations.url("/page"))).text == "the allowed page"

    assert names.given == [ALLOWED, ALLOWED]  # one lookup per client: its one connection


async def test_a_name_that_does_not_resolve_is_refused(policy: NetworkPolicy) -> None:
    with pytest.raises(UrlNotAllowed, match="cannot be resolved"):
        await policy.check_url("https://missing.test/")


async def test_a_dns_server_that_is_not_there_is_a_name_that_cannot_be_resolved() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as vacated:
        vacated.bind((ALLOWED, 0))
        port = vacated.getsockname()[1]
    policy = NetworkPolicy(resolver=NameserverResolver(ALLOWED, port, timeout_seconds=5))

    with pytest.raises(UrlNotAllowed, match="cannot be resolved"):
        await policy.check_url(f"https://{NAME}/")


# -- TLS: the name, not the address ---------------------------------------------------------------


@dataclass
class TlsSite:
    port: int
    authority: Path
    server_names: list[str | None] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A certificate authority, and a certificate it signed for NAME only (no IP address)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Outbound guard test authority")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, NAME)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(NAME)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    authority, certificate, private = directory / "ca.pem", directory / "leaf.pem", directory / "leaf.key"
    authority.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    certificate.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    private.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return authority, certificate, private


@pytest.fixture
async def tls_site(tmp_path: Path) -> AsyncIterator[TlsSite]:
    authority, certificate, private = _certificates(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificate, private)
    site = TlsSite(port=0, authority=authority)

    def remember_server_name(connection: ssl.SSLObject | ssl.SSLSocket, name: str | None, _: ssl.SSLContext) -> None:
        site.server_names.append(name)

    context.sni_callback = remember_server_name

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        site.hosts += [line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("host:")]
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, ALLOWED, 0, ssl=context)
    site.port = server.sockets[0].getsockname()[1]
    yield site
    server.close()
    await server.wait_closed()


def _clients(policy: NetworkPolicy, authority: Path) -> Iterator[httpx.AsyncClient | httpx2.AsyncClient]:
    trusting = ssl.create_default_context(cafile=str(authority))
    yield httpx.AsyncClient(transport=guarded_httpx_transport(policy, ssl_context=trusting))
    yield httpx2.AsyncClient(transport=guarded_httpx2_transport(policy, ssl_context=trusting))


async def test_tls_names_the_host_and_checks_its_certificate_while_connecting_to_the_checked_address(
    policy: NetworkPolicy, tls_site: TlsSite
) -> None:
    for client in _clients(policy, tls_site.authority):
        async with client:
            response = await client.get(f"https://{NAME}:{tls_site.port}/")
            assert (response.status_code, response.text) == (200, "ok")

    assert tls_site.server_names == [NAME, NAME]
    assert tls_site.hosts == [f"{NAME}:{tls_site.port}"] * 2


async def test_a_certificate_for_another_name_is_refused(policy: NetworkPolicy, tls_site: TlsSite) -> None:
    for client in _clients(policy, tls_site.authority):
        async with client:
            with pytest.raises((httpx.ConnectError, httpx2.ConnectError), match="certificate"):
                await client.get(f"https://other.test:{tls_site.port}/")

    assert tls_site.hosts == []
