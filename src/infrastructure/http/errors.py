"""The one table that maps errors to HTTP responses: {"error": <Name>, "detail": <message>}."""

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from application.errors import (
    Conflict,
    InvalidCursor,
    InvalidReference,
    McpAuthFailed,
    McpConnectionFailed,
    McpProtocolError,
    McpTimeout,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    RunCancelledBeforeAnswering,
    RunModelFailed,
    RunModelNotConfigured,
    RunNotCompleted,
    RunWaitsForAnswers,
    SourceTooLarge,
    StorageUnavailable,
    UnreadableSource,
    UnsupportedSourceType,
    UrlNotAllowed,
)
from application.ports.limits import RateLimited
from domain.errors import DomainError, IllegalTransition, InvalidValue
from infrastructure.http.asgi import TrackedSend
from infrastructure.security.secret_box import SecretUnreadable

logger = logging.getLogger(__name__)

# Most specific first: the first class an error is an instance of decides its status.
ERROR_STATUS: tuple[tuple[type[DomainError], int], ...] = (
    (SecretUnreadable, 500),
    (NotAuthenticated, 401),
    (PermissionDenied, 403),
    (NotFound, 404),
    (Conflict, 409),
    (IllegalTransition, 409),
    (RateLimited, 429),
    (StorageUnavailable, 503),
    (RunWaitsForAnswers, 409),
    (RunCancelledBeforeAnswering, 409),
    (RunModelNotConfigured, 400),
    (RunModelFailed, 502),
    (RunNotCompleted, 500),
    (McpTimeout, 504),
    (McpConnectionFailed, 502),
    (McpAuthFailed, 502),
    (McpProtocolError, 502),
    (InvalidCursor, 400),
    (SourceTooLarge, 413),
    (UnsupportedSourceType, 415),
    (UnreadableSource, 422),
    (InvalidReference, 422),
    (UrlNotAllowed, 422),
    (InvalidValue, 422),
    (DomainError, 400),
)

RETRY_AFTER_SECONDS = 5
"""How long a client is asked to wait before retrying when the database is unavailable."""
CHALLENGE = 'Bearer realm="threadline"'


class ErrorBody(BaseModel):
    """The body of every error."""

    error: str = Field(description="The error's name: NotFound, SlugTaken, StorageUnavailable...")
    detail: str = Field(description="What went wrong")


_HTTP_NAMES = {
    400: "BadRequest",
    401: "NotAuthenticated",
    403: "PermissionDenied",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    413: "RequestTooLarge",
    415: "UnsupportedMediaType",
    429: "RateLimited",
}


def error_response(status: int, error: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The one error body, {"error", "detail"}; also an ASGI app, for middleware that answers by itself."""
    return JSONResponse({"error": error, "detail": detail}, status_code=status, headers=headers)


def status_for(error_type: type[DomainError]) -> int:
    """The status the table gives errors of this class."""
    return next(status for cls, status in ERROR_STATUS if issubclass(error_type, cls))


def status_of(error: DomainError) -> int:
    return status_for(type(error))


def error_headers(status: int) -> dict[str, str]:
    """The headers an error of this status carries, whichever way its body is rendered."""
    if status == 401:
        return {"WWW-Authenticate": CHALLENGE}
    if status == 503:
        return {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return {}


def domain_error_response(error: DomainError) -> JSONResponse:
    status = status_of(error)
    headers = error_headers(status)
    if isinstance(error, RateLimited):
        headers["Retry-After"] = str(error.retry_after_seconds)
    return error_response(status, type(error).__name__, error.detail, headers or None)


async def _domain_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, DomainError)
    return domain_error_response(error)


def _describe(issue: dict[str, Any]) -> str:
    location = ".".join(str(part) for part in issue.get("loc", ()) if part not in ("body",))
    message = str(issue.get("msg", "invalid value"))
    return f"{location}: {message}" if location else message


async def _validation_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    issues = list(error.errors())
    if any(issue.get("type") == "json_invalid" for issue in issues):
        return error_response(400, "InvalidJson", "the request body is not valid JSON")
    return error_response(422, "ValidationError", "; ".join(_describe(i) for i in issues[:10]))


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route answers at the request's path (a route only knows its own)."""
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes)
    ]


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, StarletteHTTPException)
    name = _HTTP_NAMES.get(error.status_code, "HttpError")
    headers = dict(error.headers or {})
    if error.status_code == 405:
        headers["Allow"] = ", ".join(allowed_methods(request))
    return error_response(error.status_code, name, str(error.detail), headers)


def _internal_error() -> JSONResponse:
    return error_response(500, "InternalError", "an unexpected error occurred; it has been logged")


async def _unexpected(request: Request, error: Exception) -> JSONResponse:
    logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return _internal_error()


class UnexpectedErrorMiddleware:
    """Answers an error no handler maps with a 500 {"error", "detail"} and ends the request there.

    Starlette's own last-resort handler answers too, but then re-raises, and the server closes the
    connection under a response that said keep-alive: the client's next request on it fails. An error
    after the response started (a broken stream) still goes up, and the connection is closed as it must be.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        tracked = TrackedSend(send)
        try:
            await self._app(scope, receive, tracked)
        except StarletteHTTPException:
            raise  # meant for the framework, e.g. a body over the limit where nothing caught it
        except Exception as error:
            if tracked.started:
                raise
            response = await _unexpected(Request(scope), error)
            await response(scope, receive, send)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(DomainError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
    app.add_middleware(UnexpectedErrorMiddleware)
