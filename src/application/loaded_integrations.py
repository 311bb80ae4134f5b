"""MCP integrations read lately, kept in this process: a run's tool calls use the integrations its tools were
assembled from instead of reading them again for every call."""

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from domain.ids import IntegrationId, OrgId
from domain.integrations import McpIntegration

LOADED_INTEGRATION_SECONDS = 30.0
MAX_LOADED_INTEGRATIONS = 10_000


@dataclass(frozen=True, slots=True)
class _Entry:
    integration: McpIntegration
    expires: float


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
        self._ttl, self._max, self._now = ttl_seconds, max_integrations, monotonic
        self._entries: OrderedDict[IntegrationId, _Entry] = OrderedDict()
        self._version = 0

    @classmethod
    def none(cls) -> "LoadedIntegrations":
        """Keeps nothing: every integration is read where it is used."""
        return cls(ttl_seconds=0)

    def get(self, org_id: OrgId, integration_id: IntegrationId) -> McpIntegration | None:
        entry = self._entries.get(integration_id)
        if entry is None:
            return None
        if self._now() >= entry.expires:
            del self._entries[integration_id]
            return None
        if entry.integration.org_id != org_id:
            return None  # another organization's: the caller reads it, and is refused
        self._entries.move_to_end(integration_id)
        return entry.integration

    def version(self) -> int:
        """Taken before integrations are read, and given back to `remember`."""
        return self._version

    def remember(self, integrations: Iterable[McpIntegration], *, as_of: int) -> None:
        """Keep integrations just read, unless any was forgotten since `as_of` (the read may predate the change)."""
        if as_of != self._version or self._ttl <= 0:
            return
        expires = self._now() + self._ttl
        for integration in integrations:
            self._entries[integration.id] = _Entry(integration=integration, expires=expires)
            self._entries.move_to_end(integration.id)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def forget(self, integration_id: IntegrationId) -> None:
        self._version += 1
        self._entries.pop(integration_id, None)
