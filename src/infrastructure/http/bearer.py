"""The API key as a bearer token: one parser for the REST routes and /mcp, and OpenAPI's security scheme."""

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
