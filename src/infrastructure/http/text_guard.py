"""One rule for all text a client sends: no NUL character (U+0000), in bodies, paths or query strings.

PostgreSQL cannot store it in text at all and SQLite would keep it silently; either way it is never
meant. Request bodies are checked by `RequestModel`, the URL by `NulInUrlMiddleware`; both answer 422.
"""

from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote

from starlette.types import ASGIApp, Receive, Scope, Send

from infrastructure.http.errors import error_response

NUL = "\x00"
NUL_REFUSED = "text must not contain the NUL character (\\u0000)"


def _shown(key: str) -> str:
    return key.replace(NUL, "\\u0000")


def nul_location(value: Any, path: Iterable[str] = ()) -> str | None:
    """Where the first NUL is in a decoded JSON value (dotted keys and list indexes), or None."""
    if isinstance(value, str):
        return ".".join(path) if NUL in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            here = [*path, _shown(str(key))]
            if isinstance(key, str) and NUL in key:
                return ".".join(here)
            found = nul_location(item, here)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = nul_location(item, [*path, str(index)])
            if found is not None:
                return found
    return None


class NulInUrlMiddleware:
    """Refuses a path or query string that decodes to text holding a NUL character."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            query = scope.get("query_string", b"").decode("latin-1")
            if NUL in scope.get("path", "") or NUL in unquote(query):
                refusal = error_response(422, "ValidationError", f"the URL: {NUL_REFUSED}")
                await refusal(scope, receive, send)
                return
        await self._app(scope, receive, send)
