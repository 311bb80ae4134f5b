"""The second rendering of errors, for the OpenAI-compatible routes: `{"error": {"message", "type", "param",
"code"}}`, which OpenAI clients show properly. The status comes from the one error table (errors.py)."""

import logging
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from application.errors import AgentNotFound, NotAuthenticated, RunNotCompleted
from application.ports.limits import RateLimited
from domain.errors import DomainError
from infrastructure.http.errors import error_headers, status_of

logger = logging.getLogger(__name__)

_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}
_CODES: dict[type[DomainError], str] = {AgentNotFound: "model_not_found", NotAuthenticated: "invalid_api_key"}


class OpenAiErrorDetail(BaseModel):
    """What went wrong, as OpenAI's APIs say it."""

    message: str = Field(description="What went wrong")
    type: str = Field(description="invalid_request_error, authentication_error, permission_error or server_error")
    param: str | None = Field(default=None, description="The request field at fault, when one is")
    code: str | None = Field(description="The error's name in snake case (model_not_found, thread_busy...)")


class OpenAiErrorBody(BaseModel):
    """The body of every error on the OpenAI-compatible routes."""

    error: OpenAiErrorDetail = Field(description="What went wrong")


def openai_error_body(status: int, message: str, code: str | None) -> dict[str, Any]:
    kind = _TYPES.get(status) or ("server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def openai_error_response(status: int, message: str, code: str | None) -> JSONResponse:
    headers = error_headers(status)
    if status != 503:
        # The SDKs retry 409 and 5xx by default: here that would start the same agent run again.
        headers["x-should-retry"] = "false"
    return JSONResponse(openai_error_body(status, message, code), status_code=status, headers=headers)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _code(error: DomainError) -> str:
    if isinstance(error, RunNotCompleted):
        return error.code
    return next((code for cls, code in _CODES.items() if isinstance(error, cls)), _snake(type(error).__name__))


def _validation_message(error: RequestValidationError) -> str:
    issues = list(error.errors())[:10]
    described = []
    for issue in issues:
        location = ".".join(str(p) for p in issue.get("loc", ()) if p != "body")
        described.append(f"{location}: {issue.get('msg', 'invalid value')}" if location else str(issue.get("msg")))
    return "; ".join(described)


def rendered(error: Exception) -> JSONResponse | None:
    """The OpenAI-shaped answer to an error raised while handling a request, or None if it is not ours."""
    if isinstance(error, RateLimited):
        # Nothing was started: the SDKs may retry after Retry-After.
        headers = {"Retry-After": str(error.retry_after_seconds)}
        return JSONResponse(openai_error_body(429, error.detail, "rate_limited"), status_code=429, headers=headers)
    if isinstance(error, DomainError):
        return openai_error_response(status_of(error), error.detail, _code(error))
    if isinstance(error, RequestValidationError):
        if any(issue.get("type") == "json_invalid" for issue in error.errors()):
            return openai_error_response(400, "the request body is not valid JSON", "invalid_json")
        return openai_error_response(422, _validation_message(error), "validation_error")
    if isinstance(error, StarletteHTTPException):
        return openai_error_response(error.status_code, str(error.detail), None)
    return None


class OpenAiErrorRoute(APIRoute):
    """A route whose errors (from its body, its dependencies, authentication...) take the OpenAI shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as error:
                response = rendered(error)
                if response is None:
                    logger.exception("unhandled error on %s %s", request.method, request.url.path)
                    return openai_error_response(500, "an unexpected error occurred; it has been logged", None)
                return response

        return handle


def _documented(descriptions: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": OpenAiErrorBody, "description": d} for status, d in descriptions.items()}


_INVALID_JSON = "invalid_json: the request body is not valid JSON"
_CLASHES = (
    "thread_busy / run_not_waiting / idempotency_key_reused: the request clashes with a run's state;"
    " requires_answers: the run waits for answers this API cannot carry (POST /v1/runs/{id}/answers)"
)
OPENAI_ERRORS = _documented(
    {
        400: _INVALID_JSON,
        401: "invalid_api_key: no valid API key (Bearer)",
        404: "model_not_found: no agent of the organization has that slug (or a run named is not found)",
        409: _CLASHES,
        413: "the request body is larger than the server accepts",
        422: "validation_error / invalid_value: the body is not a valid request",
        500: "an unexpected error (it is logged)",
        503: "storage_unavailable: the database cannot be reached; retry after Retry-After seconds",
    }
)
"""What the OpenAI-compatible routes may answer besides their own responses (in OpenAPI)."""
RUN_FAILURES = _documented(
    {
        400: f"{_INVALID_JSON}; model_not_configured: the agent's model has no provider on this server (the run"
        " failed at once: give the agent another model)",
        409: f"{_CLASHES}; cancelled: the run was cancelled (POST /v1/runs/{{id}}/cancel) before it answered",
        500: "the run failed for another reason (code: the run's error code: max_steps_exceeded, interrupted,"
        " worker_lost...), or an unexpected error",
        502: "model_unavailable / model_request_rejected / model_error: the run failed because the agent's model"
        " provider could not be reached in time, kept failing, refused the request or answered what is not an"
        " answer (the message says which)",
    }
)
"""What a route that answers with its run's answer adds (Chat Completions; a streamed answer has begun with 200
already, and ends with the same error body instead)."""
