"""What every HTTP request carries and leaves behind: a request id (the caller's `X-Request-Id` when it is a
sane one, else a new one) returned in a header and set on its log lines and the runs it creates; and the
request counted in the metrics by route template and status, server-sent event streams while they are open."""

import re
import time
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from application.request_context import current_request_id
from infrastructure.metrics import Metrics

HEADER = "X-Request-Id"
_SANE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/+=-]{0,127}")


def request_id_of(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            given = value.decode("latin-1").strip()
            if _SANE.fullmatch(given):
                return given
            break
    return uuid.uuid4().hex


class RequestObservation:
    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app, self._metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        token = current_request_id.set(request_id)
        began, status, streaming = time.perf_counter(), 500, False
        metrics = self._metrics

        async def sending(message: Message) -> None:
            nonlocal status, streaming
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = MutableHeaders(scope=message)
                headers[HEADER] = request_id
                route = _route(scope)
                metrics.http_duration.labels(_method(scope), route).observe(time.perf_counter() - began)
                if headers.get("content-type", "").startswith("text/event-stream"):
                    streaming = True
                    metrics.sse_streams.inc()
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if streaming:
                metrics.sse_streams.dec()
            metrics.http_requests.labels(_method(scope), _route(scope), str(status)).inc()
            current_request_id.reset(token)


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _method(scope: Scope) -> str:
    """The request's method, or OTHER: a client's made-up methods must not make a series each."""
    method = str(scope["method"])
    return method if method in _METHODS else "OTHER"


def _route(scope: Scope) -> str:
    """The route's template (`/v1/runs/{run_id}`), never the path itself: ids would make a series each."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"
