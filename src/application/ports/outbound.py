"""The outbound guard: where requests to URLs that tenants (or models) supply may go."""

from typing import Protocol


class OutboundPolicy(Protocol):
    async def check_url(self, url: str) -> None:
        """Raise UrlNotAllowed when the URL's host is somewhere outbound requests may not go."""
        ...
