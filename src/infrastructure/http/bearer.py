"""The API key as a bearer token: one parser for the REST routes and /mcp, and OpenAPI's security scheme; and
the same reading of an Authorization header for what runs outside the routes (rate limits, /metrics)."""

from typing import Annotated

from fastapi import Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

API_KEY = HTTPBearer(
    auto_error=False,  # a missing key is refused by authentication, with the API's own error body
    scheme_name="ApiKey",
    description="An API key of the organization: `Authorization: Bearer <key>`",
)


async def api_key(credentials: Annotated[HTTPAuthorizationCredentials | None, Security(API_KEY)]) -> str | None:
    """The key the request carries, or None (no Authorization header, another scheme, an empty token)."""
    return credentials.credentials if credentials is not None else None


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value, or None (absent, another scheme, empty)."""
    scheme, _, token = (authorization or "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None
