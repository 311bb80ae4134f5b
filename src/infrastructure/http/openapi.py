"""What OpenAPI says a route of the REST API can answer when it fails, taken from the one error table.

A route names the errors of its own use case (`responses=errors(AgentNotFound, SlugTaken)`); what every
route of its shape can answer is added by `ApiRoute`: 401 when it needs a key, 422 when it takes
parameters or a body, 400 and 413 when it reads a body, 400 `InvalidCursor` when it pages, 503 when it
uses the database. Each status lists the error names it carries, with the `{"error", "detail"}` body.
"""

import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_dependant
from fastapi.routing import APIRoute

from application.errors import (
    McpAuthFailed,
    McpConnectionFailed,
    McpProtocolError,
    McpTimeout,
    StorageUnavailable,
)
from application.ports.limits import RateLimited
from domain.errors import DomainError
from infrastructure.http.bearer import API_KEY
from infrastructure.http.errors import RETRY_AFTER_SECONDS, ErrorBody, status_for

ErrorName = tuple[str, str]
"""An error's name (the body's `error`) and what it means."""

_NAMES_KEY = "x-threadline-errors"  # carries the names from `errors()` to ApiRoute, which removes it

NOT_AUTHENTICATED: ErrorName = ("NotAuthenticated", "No valid API key was presented (missing, unknown or revoked)")
VALIDATION_ERROR: ErrorName = ("ValidationError", "A parameter or a field of the body is missing or not valid")
INVALID_JSON: ErrorName = ("InvalidJson", "The request body is not valid JSON")
REQUEST_TOO_LARGE: ErrorName = ("RequestTooLarge", "The request body is larger than the server accepts")
NOT_FOUND: ErrorName = ("NotFound", "No route matches the path")

_TITLES = {
    400: "Bad request",
    401: "Not authenticated",
    403: "Not allowed for the caller's role",
    404: "Not found",
    409: "Conflicts with the current state",
    413: "Request body too large",
    415: "Unsupported file type",
    429: "Too many requests or runs this minute; nothing was created",
    422: "Not valid",
    500: "Internal error",
    502: "The MCP server failed",
    503: "Unavailable",
    504: "The MCP server timed out",
}
_HEADERS: dict[int, dict[str, Any]] = {
    401: {
        "WWW-Authenticate": {"description": "`Bearer`: the scheme to authenticate with", "schema": {"type": "string"}}
    },
    429: {
        "Retry-After": {
            "description": "Seconds until the current minute's window ends",
            "schema": {"type": "integer"},
        }
    },
    503: {
        "Retry-After": {
            "description": f"Seconds to wait before trying again ({RETRY_AFTER_SECONDS})",
            "schema": {"type": "integer"},
        }
    },
}


def _meaning(error: type[DomainError]) -> str:
    return (inspect.getdoc(error) or error.__name__).split("\n\n")[0].replace("\n", " ")


def error_names(*errors: type[DomainError]) -> dict[int, list[ErrorName]]:
    """The errors by the status the error table gives them."""
    by_status: dict[int, list[ErrorName]] = {}
    for error in errors:
        by_status.setdefault(status_for(error), []).append((error.__name__, _meaning(error)))
    return by_status


def render(status: int, names: Iterable[ErrorName]) -> dict[str, Any]:
    """One OpenAPI response: the error body, the names it may carry, an example of each."""
    named = list(dict.fromkeys(names))
    lines = "\n".join(f"- `{name}`: {meaning}" for name, meaning in named)
    response: dict[str, Any] = {
        "model": ErrorBody,
        "description": f"{_TITLES.get(status, 'Error')}. `error` is one of:\n{lines}",
        "content": {
            "application/json": {
                "examples": {name: {"value": {"error": name, "detail": meaning}} for name, meaning in named}
            }
        },
    }
    if status in _HEADERS:
        response["headers"] = _HEADERS[status]
    return response


def errors(*errors: type[DomainError], also: Iterable[tuple[int, ErrorName]] = ()) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: these errors under their statuses (and `also`, names outside the table)."""
    by_status = error_names(*errors)
    for status, name in also:
        by_status.setdefault(status, []).append(name)
    return {status: {**render(status, names), _NAMES_KEY: names} for status, names in by_status.items()}


def _dependants(dependant: Dependant) -> Iterator[Dependant]:
    yield dependant
    for sub in dependant.dependencies:
        yield from _dependants(sub)


def shape_errors(path: str, endpoint: Callable[..., Any]) -> dict[int, list[ErrorName]]:
    """What any route of this shape can answer: by its key, its parameters, its body and its pages."""
    every = list(_dependants(get_dependant(path=path, call=endpoint)))
    body = [param for sub in every for param in sub.body_params]
    path_params = [param for sub in every for param in sub.path_params]
    query = [param for sub in every for param in sub.query_params]
    headers = [param for sub in every for param in sub.header_params]
    found: dict[int, list[ErrorName]] = {}
    if any(sub.call is API_KEY for sub in every):
        found[401] = [NOT_AUTHENTICATED]
        found[429] = [(RateLimited.__name__, _meaning(RateLimited))]  # THREADLINE_KEY_REQUESTS_PER_MINUTE
        found[503] = [(StorageUnavailable.__name__, _meaning(StorageUnavailable))]
    if body:
        found.setdefault(400, []).append(INVALID_JSON)
        found[413] = [REQUEST_TOO_LARGE]
    if body or path_params or query or headers:
        found[422] = [VALIDATION_ERROR]
    if path_params:
        found[404] = [NOT_FOUND]
    if any(param.name == "cursor" for param in query):
        found.setdefault(400, []).append(("InvalidCursor", "A pagination cursor that this API did not hand out"))
    return found


class ApiRoute(APIRoute):
    """A route of the REST API: its OpenAPI responses list every error it can answer (see the module)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        declared: dict[int | str, dict[str, Any]] = dict(kwargs.pop("responses", None) or {})
        by_status: dict[int, list[ErrorName]] = {}
        for status, response in list(declared.items()):
            names = response.get(_NAMES_KEY)
            if names is not None:
                by_status.setdefault(int(status), []).extend(names)
                del declared[status]
        for status, names in shape_errors(path, endpoint).items():
            by_status.setdefault(status, []).extend(names)
        for status, names in by_status.items():
            declared[status] = render(status, names)
        super().__init__(path, endpoint, responses=declared, **kwargs)


MCP_SERVER: tuple[type[DomainError], ...] = (McpConnectionFailed, McpAuthFailed, McpProtocolError, McpTimeout)
"""What a route that talks to an MCP server can answer when the server fails (502, 504)."""
