"""Refuses request bodies above a size limit before they are read into memory."""

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from infrastructure.http.asgi import TrackedSend
from infrastructure.http.errors import error_response


class BodyTooLarge(HTTPException):
    """An HTTPException, so the framework renders it as a 413 wherever the body is being read."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request bodies are limited to {max_bytes} bytes")


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self._app = app
        self._max = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self._max:
            await self._refuse(scope, receive, send)
            return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self._max:
                    raise BodyTooLarge(self._max)
            return message

        tracked = TrackedSend(send)
        try:
            await self._app(scope, limited_receive, tracked)
        except BodyTooLarge:
            if not tracked.started:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = error_response(413, "RequestTooLarge", f"request bodies are limited to {self._max} bytes")
        await refusal(scope, receive, send)
