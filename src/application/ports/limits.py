"""Ports of the limits an operator sets on organizations."""

from typing import Protocol

from domain.ids import OrgId


class RunRateLimit(Protocol):
    async def take(self, org_id: OrgId) -> None:
        """Count one new run of the organization; raises RateLimited (and counts nothing) when its runs per
        minute are used up."""
        ...


class NoRunRateLimit:
    """No limit: every run is allowed (the default of use cases built without one)."""

    async def take(self, org_id: OrgId) -> None:
        return None
