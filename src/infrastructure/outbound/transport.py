"""HTTP transports (httpx, and httpx2 that the MCP SDK uses) that connect only where the outbound policy allows.

Each new connection resolves its host once, checks every address, and connects to a checked one, so a
name that answers differently a moment later (DNS rebinding) cannot steer it elsewhere. The request keeps
its URL: the Host header, the TLS server name and the certificate check all use the host name. A redirect
that needs a new connection is checked the same way; pooled connections are reused without a new lookup.
"""

import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from types import ModuleType
from typing import Any, TypeVar

import anyio
import httpcore
import httpcore2
import httpx
import httpx2

from application.errors import UrlNotAllowed
from infrastructure.outbound.guard import NetworkPolicy

T = TypeVar("T")
# RFC 8305 (happy eyeballs): the next address gets its try when the previous one is this slow to connect.
_NEXT_ADDRESS_DELAY = 0.25
# The clients' own defaults.
_MAX_CONNECTIONS, _MAX_KEEPALIVE, _KEEPALIVE_EXPIRY = 100, 20, 5.0


def guarded_httpx_transport(policy: NetworkPolicy, *, ssl_context: ssl.SSLContext) -> httpx.AsyncHTTPTransport:
    limits = httpx.Limits(
        max_connections=_MAX_CONNECTIONS, max_keepalive_connections=_MAX_KEEPALIVE, keepalive_expiry=_KEEPALIVE_EXPIRY
    )
    transport = httpx.AsyncHTTPTransport(verify=ssl_context, trust_env=False, limits=limits)
    return _guarded(transport, httpcore, policy, ssl_context)


def guarded_httpx2_transport(policy: NetworkPolicy, *, ssl_context: ssl.SSLContext) -> httpx2.AsyncHTTPTransport:
    limits = httpx2.Limits(
        max_connections=_MAX_CONNECTIONS, max_keepalive_connections=_MAX_KEEPALIVE, keepalive_expiry=_KEEPALIVE_EXPIRY
    )
    transport = httpx2.AsyncHTTPTransport(verify=ssl_context, trust_env=False, limits=limits)
    return _guarded(transport, httpcore2, policy, ssl_context)


def _guarded(transport: T, core: ModuleType, policy: NetworkPolicy, ssl_context: ssl.SSLContext) -> T:
    """The transport with its connection pool rebuilt around a guarded network backend (httpx offers no
    public way to hand its pool one; a pool kept elsewhere by a future version fails here, not open)."""
    if not isinstance(getattr(transport, "_pool", None), core.AsyncConnectionPool):
        raise RuntimeError(f"{type(transport).__module__} keeps no connection pool where the guard expects it")
    backend = _GuardedBackend(policy, core.AnyIOBackend(), core.ConnectError, core.ConnectTimeout)
    transport._pool = core.AsyncConnectionPool(  # type: ignore[attr-defined]
        ssl_context=ssl_context,
        max_connections=_MAX_CONNECTIONS,
        max_keepalive_connections=_MAX_KEEPALIVE,
        keepalive_expiry=_KEEPALIVE_EXPIRY,
        network_backend=backend,
    )
    return transport


class _GuardedBackend:
    """A network backend for httpcore or httpcore2: the library's own, connecting only to checked addresses."""

    def __init__(
        self, policy: NetworkPolicy, inner: Any, connect_error: type[Exception], connect_timeout: type[Exception]
    ) -> None:
        self._policy, self._inner = policy, inner
        self._connect_error, self._connect_timeout = connect_error, connect_timeout

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        async def attempt(address: str) -> Any:
            return await self._inner.connect_tcp(
                address, port, local_address=local_address, socket_options=socket_options
            )

        try:
            with anyio.fail_after(timeout):
                addresses = await self._policy.addresses(host)
                return await _first_connected([str(a) for a in addresses], attempt, self._connect_error)
        except UrlNotAllowed as refused:
            raise self._connect_error(refused.detail) from None
        except TimeoutError:
            raise self._connect_timeout(f"connecting to {host} timed out") from None

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        raise self._connect_error("outbound requests go over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


async def _first_connected(
    addresses: Sequence[str], attempt: Callable[[str], Awaitable[Any]], failure: type[Exception]
) -> Any:
    """The first address to connect, trying them in order and starting the next one as soon as the
    previous one failed or after a short delay; the other attempts are then given up."""
    connected: list[Any] = []
    errors: list[Exception] = []
    async with anyio.create_task_group() as group:
        for address in addresses:
            failed = anyio.Event()

            async def try_address(address: str = address, failed: anyio.Event = failed) -> None:
                try:
                    connected.append(await attempt(address))
                except failure as error:
                    errors.append(error)
                    failed.set()
                else:
                    group.cancel_scope.cancel()

            group.start_soon(try_address)
            with anyio.move_on_after(_NEXT_ADDRESS_DELAY):
                await failed.wait()
    for extra in connected[1:]:
        await extra.aclose()
    if connected:
        return connected[0]
    raise errors[-1] if errors else failure("no address to connect to")
