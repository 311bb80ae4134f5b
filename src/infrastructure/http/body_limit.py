"""Refuses request bodies above a size limit before they are read into memory. Source uploads (multipart, to
`/v1/threads/{id}/sources` and `/v1/agents/{id}/sources`) have a limit of their own: a file as large as sources
may be, with room for the form around it, so the request limit never refuses a file the source limit allows."""

import re

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from infrastructure.http.asgi import TrackedSend
from infrastructure.http.errors import error_response


class BodyTooLarge(HTTPException):
    """An HTTPException, so the framework renders it as a 413 wherever the body is being read."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request bodies are limited to {max_bytes} bytes")


MULTIPART_ALLOWANCE = 64 * 1024
"""Bytes of an upload's form around its file (boundaries, part headers, other fields)."""
_UPLOADS = re.compile(r"/v1/(threads|agents)/[^/]+/sources/?")


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int, max_source_bytes: int | None = None) -> None:
        self._app = app
        self._max = max_bytes
        self._upload_max = max(max_bytes, (max_source_bytes or 0) + MULTIPART_ALLOWANCE)

    def _limit(self, scope: Scope) -> int:
        upload = scope.get("method") == "POST" and _UPLOADS.fullmatch(str(scope.get("path", "")))
        return self._upload_max if upload else self._max

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        limit = self._limit(scope)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, receive, send, limit)
            return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        tracked = TrackedSend(send)
        try:
            await self._app(scope, limited_receive, tracked)
        except BodyTooLarge:
            if not tracked.started:
                await self._refuse(scope, receive, send, limit)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        refusal = error_response(413, "RequestTooLarge", f"request bodies are limited to {limit} bytes")
        await refusal(scope, receive, send)
