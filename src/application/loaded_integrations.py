"""MCP integrations read lately, kept in this process: a run's tool calls use the integrations its tools were
assembled from instead of reading them again for every call."""

import time
from collections.abc import Callable, Iterable

from application.expiring import ExpiringMap
from domain.ids import IntegrationId, OrgId
from domain.integrations import McpIntegration

LOADED_INTEGRATION_SECONDS = 30.0
MAX_LOADED_INTEGRATIONS = 10_000


class LoadedIntegrations:
    """An integration changed, disabled or deleted is forgotten at once: `forget` is called wherever the MCP
    gateway forgets its session and catalogs (the use cases that change integrations in this process, the
    catalog change notices of the others). Every one is forgotten after `ttl_seconds` anyway, which bounds what a
    notice lost while its connection was down can cost."""

    def __init__(
        self,
        *,
        ttl_seconds: float = LOADED_INTEGRATION_SECONDS,
        max_integrations: int = MAX_LOADED_INTEGRATIONS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kept: ExpiringMap[IntegrationId, McpIntegration] = ExpiringMap(
            ttl_seconds=ttl_seconds, max_entries=max_integrations, monotonic=monotonic
        )

    @classmethod
    def none(cls) -> "LoadedIntegrations":
        """Keeps nothing: every integration is read where it is used."""
        return cls(ttl_seconds=0)

    def get(self, org_id: OrgId, integration_id: IntegrationId) -> McpIntegration | None:
        integration = self._kept.get(integration_id)
        if integration is None or integration.org_id != org_id:
            return None  # another organization's: the caller reads it, and is refused
        return integration

    def version(self) -> int:
        """Taken before integrations are read, and given back to `remember`."""
        return self._kept.version()

    def remember(self, integrations: Iterable[McpIntegration], *, as_of: int) -> None:
        """Keep integrations just read, unless any was forgotten since `as_of` (the read may predate the change)."""
        self._kept.put(((integration.id, integration) for integration in integrations), as_of=as_of)

    def forget(self, integration_id: IntegrationId) -> None:
        self._kept.forget(lambda kept_id, _integration: kept_id == integration_id)
