"""Turning what the MCP SDK and its transports raise into the application's typed errors."""

import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
)
from pydantic import ValidationError

from application.errors import (
    McpAuthFailed,
    McpCapabilityMissing,
    McpConnectionFailed,
    McpError,
    McpInvalidArguments,
    McpProtocolError,
    McpResourceNotFound,
    McpTimeout,
)

RESOURCE_NOT_FOUND = -32002
READING_RESOURCE = "reading resource"
"""How the gateway's `doing` of a resources/read begins."""
_MESSAGE_MAX = 300


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_MAX else text[:_MESSAGE_MAX] + "…"


def is_session_gone(error: BaseException) -> bool:
    """The server no longer knows our session (it restarted): the request was not processed."""
    return isinstance(error, MCPError) and error.code == INVALID_REQUEST and "Session terminated" in error.message


def is_generic_http_error(error: BaseException | None) -> bool:
    """The transport's stand-in for an HTTP error status without a JSON-RPC body."""
    return (
        isinstance(error, MCPError)
        and error.code == INTERNAL_ERROR
        and error.message == ("Server returned an error response")
    )


def is_connection_lost(error: BaseException) -> bool:
    return is_session_gone(error) or (isinstance(error, MCPError) and error.code == CONNECTION_CLOSED)


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def translate(error: BaseException, *, doing: str, auth_refused: bool = False) -> McpError:
    """The typed error for a failure while `doing` something (e.g. "calling tool 'echo'")."""
    if isinstance(error, McpError):
        return error
    if auth_refused:
        return McpAuthFailed(f"the MCP server refused the integration's credentials while {doing}")
    found = leaves(error)
    for leaf in found:
        if isinstance(leaf, McpError):
            return leaf
    leaf = next((e for e in found if isinstance(e, Exception)), found[0])
    if isinstance(leaf, TimeoutError):
        return McpTimeout(f"the MCP server did not answer in time while {doing}")
    if isinstance(leaf, MCPError):
        code, message = leaf.code, _short(leaf.message)
        if code == REQUEST_TIMEOUT:
            return McpTimeout(f"the MCP server did not answer in time while {doing}")
        if code == CONNECTION_CLOSED or is_session_gone(leaf):
            return McpConnectionFailed(f"the connection to the MCP server was lost while {doing}")
        if code == RESOURCE_NOT_FOUND:
            return McpResourceNotFound(f"the MCP server has no such resource: {message}")
        if code == METHOD_NOT_FOUND:
            return McpCapabilityMissing(f"the MCP server does not support this while {doing}: {message}")
        if code == PARSE_ERROR:
            return McpProtocolError(f"the MCP server sent something that is not valid MCP while {doing}")
        if code == INVALID_PARAMS and doing.startswith(READING_RESOURCE):
            # Invalid params is how a server says a resource does not exist (SEP-2164, 2026-07-28).
            return McpResourceNotFound(f"the MCP server has no such resource while {doing}: {message}")
        if code == INVALID_PARAMS:
            return McpInvalidArguments(f"the MCP server refused the arguments while {doing}: {message}")
        return McpProtocolError(f"the MCP server answered with error {code} while {doing}: {message}")
    if isinstance(leaf, ValidationError):
        return McpProtocolError(f"the MCP server sent an invalid response while {doing}")
    if isinstance(leaf, (httpx2.ConnectError, ConnectionError)):
        return McpConnectionFailed(f"cannot connect to the MCP server while {doing}")
    if isinstance(leaf, (httpx2.TransportError, OSError)):
        return McpConnectionFailed(f"the connection to the MCP server failed while {doing}: {type(leaf).__name__}")
    if isinstance(leaf, httpx2.HTTPStatusError):
        return McpConnectionFailed(f"the MCP server answered HTTP {leaf.response.status_code} while {doing}")
    return McpProtocolError(f"the MCP server could not be used while {doing}: {type(leaf).__name__}")
