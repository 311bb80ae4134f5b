"""Ports of the limits an operator sets on organizations."""

from typing import Protocol

from application.errors import ApplicationError
from domain.ids import OrgId


class RateLimited(ApplicationError):
    """Too many requests or runs in the current minute; nothing was created. Try again after Retry-After."""

    def __init__(self, detail: str, *, retry_after_seconds: int) -> None:
        super().__init__(detail)
        self.retry_after_seconds = retry_after_seconds


class RunRateLimit(Protocol):
    async def take(self, org_id: OrgId) -> None:
        """Count one new run of the organization; raises RateLimited (and counts nothing) when its runs per
        minute are used up."""
        ...


class NoRunRateLimit:
    """No limit: every run is allowed (the default of use cases built without one)."""

    async def take(self, org_id: OrgId) -> None:
        return None
