"""One live session with an integration's MCP server, owned by a background task.

The SDK's client is an async context manager whose task group belongs to the task that entered
it, so a session shared by many callers lives in a task of its own: it opens the client, reports
ready, and keeps it open until asked to close or until the connection drops.
"""

import asyncio
import contextlib
import contextvars
import logging
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from application.errors import McpConnectionFailed, McpTimeout
from application.ports.mcp import McpQuestion, McpTarget, QuestionAsker, ToolLog
from domain.integrations import Transport
from infrastructure.mcp_client.errors import translate
from infrastructure.mcp_client.oauth import auth_failure
from infrastructure.outbound.guard import NetworkPolicy
from infrastructure.outbound.transport import guarded_httpx2_transport

logger = logging.getLogger(__name__)
T = TypeVar("T")

CLIENT_INFO = types.Implementation(name="threadline", version="0.1.0")
# Long-lived response streams (SSE) may stay quiet for a long time; requests have their own timeout.
_STREAM_READ_TIMEOUT = 300.0
_DRAIN_SECONDS = 0.25
_DRAIN_BYTES = 65_536
Listener = Callable[[str], None]
"""Told the kind of catalog that changed: "tools", "prompts" or "resources"."""


class _WatchedReadStream:
    """Passes the transport's messages on, and notes when the stream ends (the server is gone)."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner, self._on_end = inner, on_end

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> "_WatchedReadStream":
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> "_WatchedReadStream":
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc)
        return result


class _FinishedStream(httpx2.AsyncByteStream):
    """A POST's event stream that, closed before its end, reads what is left of it first (within _DRAIN_SECONDS
    and _DRAIN_BYTES), so that its connection goes back to the pool instead of being closed. One read to its end
    is closed as it is (reading past the end would wait for what never comes, or, on a connection the server
    closes, never stop)."""

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._inner:
            yield part
        self._ended = True

    async def aclose(self) -> None:
        try:
            if not self._ended:
                with anyio.move_on_after(_DRAIN_SECONDS):
                    left = _DRAIN_BYTES
                    async for part in self._inner:
                        left -= len(part)
                        if left < 0:
                            break
        except httpx2.TransportError:
            pass  # the stream was cut: its connection is closed below, as it would have been
        finally:
            await self._inner.aclose()


class _ReusedConnections(httpx2.AsyncBaseTransport):
    """The SDK reads a POST's event stream until the response to its request arrives, then closes it. The server
    ends that stream right after the response, but closing it before reading its end closes the connection: every
    request would open a new one (a TCP handshake, and a socket left in TIME_WAIT, per tool call). This transport
    reads the rest of such a stream before closing it, so the connection is kept for the next request."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        streamed = response.headers.get("content-type", "").startswith("text/event-stream")
        kept = response.headers.get("connection", "").lower() != "close"  # else it is not reused anyway
        if request.method == "POST" and streamed and kept and isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _FinishedStream(response.stream)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Transport:
    """The SDK transport for a target, with the read stream watched and HTTP statuses recorded."""

    def __init__(
        self,
        target: McpTarget,
        stdio: StdioServerParameters | None,
        outbound: NetworkPolicy,
        on_end: Callable[[], None],
        on_status: Callable[[int], None],
        auth: httpx2.Auth | None = None,
    ) -> None:
        self._target, self._stdio, self._outbound = target, stdio, outbound
        self._on_end, self._on_status = on_end, on_status
        self._auth = auth
        self._stack = contextlib.AsyncExitStack()

    def _http_client(
        self,
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        async def record(response: httpx2.Response) -> None:
            self._on_status(response.status_code)

        connect = self._target.timeout_seconds
        # Certificate authorities may come from SSL_CERT_FILE / SSL_CERT_DIR; proxies from the environment
        # may not (trust_env=False): they would carry the integration's requests and credentials past the guard.
        transport = _ReusedConnections(
            guarded_httpx2_transport(self._outbound, ssl_context=httpx2.create_ssl_context())
        )
        return httpx2.AsyncClient(
            headers={**(headers or {}), **self._target.headers},
            timeout=timeout or httpx2.Timeout(connect, read=_STREAM_READ_TIMEOUT),
            auth=auth or self._auth,
            event_hooks={"response": [record]},
            transport=transport,
            trust_env=False,
        )

    async def __aenter__(self) -> tuple[Any, Any]:
        target = self._target
        try:
            if target.transport is Transport.STDIO:
                assert self._stdio is not None
                inner = stdio_client(self._stdio)
            elif target.transport is Transport.SSE:
                assert target.url is not None
                inner = sse_client(
                    target.url,
                    timeout=target.timeout_seconds,
                    sse_read_timeout=_STREAM_READ_TIMEOUT,
                    httpx_client_factory=self._http_client,
                )
            else:
                assert target.url is not None
                client = await self._stack.enter_async_context(self._http_client())
                inner = streamable_http_client(target.url, http_client=client)
            read, write = await self._stack.enter_async_context(inner)
        except BaseException:
            await self._stack.aclose()
            raise
        return _WatchedReadStream(read, self._on_end), write

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._stack.__aexit__(exc_type, exc, tb)


@dataclass(frozen=True, eq=False)
class OpenCall:
    """A tool call open on a session: who hears what its server sends during it, besides the result."""

    ask: QuestionAsker | None = None
    log: ToolLog | None = None


_OPEN: "weakref.WeakKeyDictionary[Any, list[OpenCall]]" = weakref.WeakKeyDictionary()
"""The calls open on each session, by session."""
_CALL: contextvars.ContextVar[OpenCall | None] = contextvars.ContextVar("mcp_open_call", default=None)


@contextlib.contextmanager
def open_call(session: Any, call: OpenCall) -> Iterator[None]:
    """While a call is open on `session`, what its server sends during it (`elicitation/create`,
    `notifications/message`) goes to `call`."""
    calls = _OPEN.setdefault(session, [])
    calls.append(call)
    token = _CALL.set(call)
    try:
        yield
    finally:
        _CALL.reset(token)
        calls.remove(call)


def _call_of(session: Any, hears: Callable[[OpenCall], bool]) -> OpenCall | str:
    """The call a server's request or notification belongs to: the one whose task it arrived in when the
    transport tells (Streamable HTTP), else the only call open on the session that hears it; else why not."""
    call = _CALL.get()
    if call is not None:
        return call
    calls = [c for c in _OPEN.get(session) or [] if hears(c)]
    if len(calls) == 1:
        return calls[0]
    return "no call of a run is open" if not calls else f"{len(calls)} calls are open on this session"


async def _asked_during_a_call(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
    """Form elicitation is declared: 2026-07-28 servers ask in an InputRequiredResult (the run waits, and the call
    is made again with the answers); a handshake-era server asks during the call, and the question goes to that
    call's asker (the run waits while the call stays open). Which call asks: the one whose task the request
    arrived in when the transport tells, else the only call open on the session that can ask."""
    if not isinstance(params, types.ElicitRequestFormParams):
        return types.ErrorData(code=types.INVALID_PARAMS, message="Threadline offers form elicitation only")
    call = _call_of(context.session, lambda c: c.ask is not None)
    if isinstance(call, str) or call.ask is None:
        why = call if isinstance(call, str) else "the call that asks cannot wait for the user"
        return types.ErrorData(code=types.INVALID_REQUEST, message=f"Threadline cannot ask the user: {why}")
    asker = call.ask
    question = McpQuestion(key="", message=params.message, requested_schema=dict(params.requested_schema))
    try:
        answer = await asker(question)
    except Exception as error:
        logger.warning("a question of an MCP server could not be asked", exc_info=True)
        return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the question could not be asked: {error}")
    return types.ElicitResult(action=answer.action, content=answer.content)


class McpConnection:
    def __init__(
        self,
        target: McpTarget,
        stdio: StdioServerParameters | None,
        outbound: NetworkPolicy,
        on_change: Listener,
        auth: httpx2.Auth | None = None,
    ) -> None:
        self.target = target
        self._auth = auth
        self._stdio = stdio
        self._outbound = outbound
        self._on_change = on_change
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self.lost = asyncio.Event()
        """Set once the session can serve no more requests (the server went away, or it was closed)."""
        self.auth_refused = False
        self.session_rejected = False
        self.last_used = time.monotonic()
        self.in_flight = 0

    @property
    def protocol_version(self) -> str:
        assert self._client is not None
        return self._client.protocol_version

    @property
    def client(self) -> Client:
        assert self._client is not None
        return self._client

    @property
    def modern(self) -> bool:
        return self._client is not None and self._client.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def open(self) -> None:
        """Connect within the target's timeout, or raise a typed error."""
        self._task = asyncio.create_task(self._serve(), name=f"mcp-session-{self.target.integration_id}")
        try:
            async with asyncio.timeout(self.target.timeout_seconds):
                await self._ready.wait()
        except TimeoutError:
            await self.close()
            raise McpTimeout("connecting to the MCP server timed out") from None
        if self._failure is not None or self._client is None:
            failure = self._failure or McpConnectionFailed("the MCP server closed the connection at once")
            await self.close()
            raise self._typed(failure, doing="connecting")

    async def _serve(self) -> None:
        transport = _Transport(
            self.target, self._stdio, self._outbound, self._mark_broken, self._record_status, self._auth
        )
        try:
            async with Client(
                transport,
                mode="auto",
                cache=None,
                read_timeout_seconds=self.target.timeout_seconds,
                message_handler=self._on_message,
                elicitation_callback=_asked_during_a_call,
                logging_callback=self._logged,
                client_info=CLIENT_INFO,
            ) as client:
                self._client = client
                async with anyio.create_task_group() as group:
                    if self.modern and self._can_listen(client):
                        # Ready only once the server acknowledged the subscription: no change is missed.
                        await group.start(self._listen, client)
                    self._ready.set()
                    await self._stop.wait()
                    group.cancel_scope.cancel()
        except Exception as error:  # reported to whoever waits for the connection
            self._failure = error
            if self._ready.is_set():
                logger.info(
                    "MCP session ended",
                    extra={"integration_id": str(self.target.integration_id), "error": type(error).__name__},
                )
        finally:
            self._mark_broken()
            self._ready.set()

    @staticmethod
    def _can_listen(client: Client) -> bool:
        capabilities = client.server_capabilities
        return any(
            getattr(capability, "list_changed", False)
            for capability in (capabilities.tools, capabilities.prompts, capabilities.resources)
        )

    async def _listen(self, client: Client, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        started = False
        try:
            async with client.listen(
                tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
            ) as subscription:
                task_status.started()
                started = True
                async for _event in subscription:
                    pass  # each event is also passed to _on_message, which invalidates
        except Exception:
            # Events may have been missed: forget every catalog and let the next call reconnect.
            for kind in ("tools", "prompts", "resources"):
                self._on_change(kind)
            self._mark_broken()
            if not started:
                task_status.started()

    async def _logged(self, params: types.LoggingMessageNotificationParams) -> None:
        """A log message of the server: told to the call it came with (dropped when that cannot be told)."""
        session = self._client.session if self._client is not None else None
        call = _call_of(session, lambda c: c.log is not None)
        if isinstance(call, str) or call.log is None:
            return
        try:
            await call.log(params.level, params.logger, params.data)
        except Exception:  # telling followers must never fail the session
            logger.debug("a tool call's log message could not be told", exc_info=True)

    async def _on_message(self, message: Any) -> None:
        kind = {
            types.ToolListChangedNotification: "tools",
            types.PromptListChangedNotification: "prompts",
            types.ResourceListChangedNotification: "resources",
        }.get(type(message))
        if kind is not None:
            self._on_change(kind)

    @property
    def broken(self) -> bool:
        return self.lost.is_set()

    def _mark_broken(self) -> None:
        self.lost.set()

    def _record_status(self, status: int) -> None:
        if status in (401, 403):
            self.auth_refused = True
        elif status < 300 and self._auth is not None:
            self.auth_refused = False  # an OAuth token the server refused was replaced and accepted
        elif status in (400, 404) and self._ready.is_set():
            # A stateful server that restarted no longer knows our session id.
            self.session_rejected = True

    async def request(self, operation: Callable[[Client], Awaitable[T]], *, doing: str, bounded: bool = True) -> T:
        """Run one request on this session within the target's timeout (unless the operation bounds itself:
        `bounded=False`), translating failures."""
        client = self.client
        self.in_flight += 1
        try:
            # The SDK enforces the timeout per request; this is the backstop for everything around it.
            async with asyncio.timeout(self.target.timeout_seconds + 1 if bounded else None):
                return await operation(client)
        except Exception as error:
            raise self._typed(error, doing=doing) from error
        finally:
            self.in_flight -= 1
            self.last_used = time.monotonic()

    def _typed(self, error: BaseException, *, doing: str) -> Exception:
        # When an OAuth token could not be had, the server's refusal is explained by why (re-authorize).
        failure = auth_failure(self._auth) if self.auth_refused else None
        return failure or translate(error, doing=doing, auth_refused=self.auth_refused)

    async def close(self) -> None:
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        try:
            async with asyncio.timeout(5):
                await asyncio.shield(task)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


@contextlib.asynccontextmanager
async def opened(connection: McpConnection) -> AsyncIterator[McpConnection]:
    await connection.open()
    try:
        yield connection
    finally:
        await connection.close()
