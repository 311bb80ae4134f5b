"""Serves the console's files: GET only, no data, no authentication of its own.

Everything the page shows it asks the REST API for, with the API key the person signed in with, so the
REST API's authorization applies to it as to any client. The Content-Security-Policy keeps the page to
its own files: no inline script, nothing from another host.
"""

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import Response

from infrastructure.http.errors import error_response

STATIC = Path(__file__).parent / "static"
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# The files are listed once at import: a request can only ever name one of them (no path is joined).
ASSETS = {
    path.relative_to(STATIC).as_posix(): path
    for path in sorted(STATIC.rglob("*"))
    if path.is_file() and path.suffix in MEDIA_TYPES
}

router = APIRouter(prefix="/console", include_in_schema=False)


def _file(name: str) -> Response:
    path = ASSETS.get(name)
    if path is None:
        response = error_response(404, "NotFound", f"the console has no file {name!r}")
        response.headers.update(HEADERS)
        return response
    return Response(path.read_bytes(), media_type=MEDIA_TYPES[path.suffix], headers=HEADERS)


@router.get("")
@router.get("/")
async def console_page() -> Response:
    return _file("index.html")


@router.get("/assets/{name:path}")
async def console_asset(name: str) -> Response:
    return _file(name)
