"""A local stand-in for Langfuse's OTLP endpoint: a real HTTP server on 127.0.0.1 that decodes what arrives.

    async with OtlpReceiver() as receiver:
        tracer = LangfuseTracer(public_key=..., secret_key=..., base_url=receiver.base_url)
        ...
        await tracer.flush()
        root = await receiver.wait_for_span("run")

The server runs in its own thread, so a blocking export never waits on the test's event loop; each export
wakes the waiters, so tests wait for spans without sleeping. It can answer with an error status
(`receiver.status = 500`) or hold exports until `release()` to play a slow or failing collector.
Only protobuf is decoded: the SDK's exporter (opentelemetry-exporter-otlp-proto-http) sends nothing else;
any other content type is answered 415 and recorded, so a test would notice.
"""

import asyncio
import gzip
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self, TypeVar

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Status

TRACES_PATH = "/api/public/otel/v1/traces"
_HOLD_LIMIT_SECONDS = 10.0

T = TypeVar("T")


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    attributes: Mapping[str, Any]
    status_code: str
    status_message: str
    scope: str
    resource: Mapping[str, Any]
    started_ns: int
    ended_ns: int

    def json_attribute(self, key: str) -> Any:
        """Langfuse sends input, output, usage, parameters and metadata values JSON-encoded."""
        return json.loads(self.attributes[key])


@dataclass(frozen=True)
class ReceivedRequest:
    path: str
    headers: Mapping[str, str]
    answered: int


class OtlpReceiver:
    def __init__(self, *, status: int = 200, wait_limit: float = 5.0) -> None:
        self.status = status
        self.wait_limit = wait_limit
        self._spans: list[ReceivedSpan] = []
        self._requests: list[ReceivedRequest] = []
        self._waiting = 0
        self._lock = threading.Lock()
        self._answer = threading.Event()
        self._answer.set()
        self._changed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "use `async with OtlpReceiver() as receiver`"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    @property
    def requests(self) -> list[ReceivedRequest]:
        """Answered export requests, failed ones included."""
        with self._lock:
            return list(self._requests)

    @property
    def waiting(self) -> int:
        """Exports that arrived and are being held, not answered yet."""
        with self._lock:
            return self._waiting

    def hold(self) -> None:
        """Keep exports waiting (a stalled collector) until `release()`."""
        self._answer.clear()

    def release(self) -> None:
        self._answer.set()

    def span(self, name: str) -> ReceivedSpan:
        matches = [span for span in self.spans if span.name == name]
        assert len(matches) == 1, f"expected one span named {name!r}, got {len(matches)}"
        return matches[0]

    async def wait_for_spans(self, count: int) -> list[ReceivedSpan]:
        def ready() -> list[ReceivedSpan] | None:
            spans = self.spans
            return spans if len(spans) >= count else None

        return await self._wait_until(ready, f"{count} spans")

    async def wait_for_span(self, name: str) -> ReceivedSpan:
        def ready() -> ReceivedSpan | None:
            return next((span for span in self.spans if span.name == name), None)

        return await self._wait_until(ready, f"a span named {name!r}")

    async def wait_for_requests(self, count: int) -> None:
        """Until `count` export requests arrived (held ones included)."""

        def ready() -> bool | None:
            with self._lock:
                return True if len(self._requests) + self._waiting >= count else None

        await self._wait_until(ready, f"{count} export requests")

    async def _wait_until(self, ready: Callable[[], T | None], what: str) -> T:
        # A bound on every wait, so a missing span fails the test instead of hanging it.
        try:
            async with asyncio.timeout(self.wait_limit):
                while True:
                    # Cleared before looking: an export landing after the look sets it again.
                    self._changed.clear()
                    result = ready()
                    if result is not None:
                        return result
                    await self._changed.wait()
        except TimeoutError:
            names = [span.name for span in self.spans]
            raise AssertionError(f"no {what} after {self.wait_limit}s; received spans: {names}") from None

    async def __aenter__(self) -> Self:
        self._loop = asyncio.get_running_loop()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="otlp-receiver",
            daemon=True,
        )
        self._thread.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
        if self._server is not None:
            await asyncio.to_thread(self._server.shutdown)
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def _receive(self, path: str, headers: Mapping[str, str], body: bytes) -> int:
        """Runs in a server thread: decode, record, wake the waiters; returns the status to answer."""
        with self._lock:
            self._waiting += 1
        self._notify()
        self._answer.wait(timeout=_HOLD_LIMIT_SECONDS)
        status = self.status
        spans: list[ReceivedSpan] = []
        if path != TRACES_PATH:
            status = 404
        elif headers.get("content-type") != "application/x-protobuf":
            status = 415
        elif status == 200:
            if headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            spans = _decode(ExportTraceServiceRequest.FromString(body))
        with self._lock:
            self._waiting -= 1
            self._requests.append(ReceivedRequest(path=path, headers=dict(headers), answered=status))
            self._spans.extend(spans)
        self._notify()
        return status

    def _notify(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._changed.set)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, receiver: OtlpReceiver) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.receiver = receiver


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        length = self.headers.get("Content-Length")
        if length is None:
            self._answer(411)
            return
        body = self.rfile.read(int(length))
        headers = {key.lower(): value for key, value in self.headers.items()}
        self._answer(self.server.receiver._receive(self.path, headers, body))

    def _answer(self, status: int) -> None:
        payload = ExportTraceServiceResponse().SerializeToString() if status == 200 else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _decode(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    spans = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex() or None,
                        attributes={kv.key: _value(kv.value) for kv in span.attributes},
                        status_code=Status.StatusCode.Name(span.status.code).removeprefix("STATUS_CODE_"),
                        status_message=span.status.message,
                        scope=scope_spans.scope.name,
                        resource=resource,
                        started_ns=span.start_time_unix_nano,
                        ended_ns=span.end_time_unix_nano,
                    )
                )
    return spans


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind)
