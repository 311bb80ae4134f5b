"""Catalogs (tools, resources, resource templates, prompts) cached per integration."""

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from domain.ids import IntegrationId

# A resources list_changed also changes the templates.
RELATED_KINDS = {
    "tools": ("tools",),
    "prompts": ("prompts",),
    "resources": ("resources", "resource_templates"),
}


@dataclass
class _Entry:
    version: datetime
    expires_at: float
    value: Any


class CatalogCache:
    """Entries expire after their TTL and are dropped at once when the server says the list changed.

    A generation counter per integration and kind keeps a fetch that started before a change from
    storing its (stale) answer after the change was announced.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._entries: dict[tuple[IntegrationId, str], _Entry] = {}
        self._generations: dict[tuple[IntegrationId, str], int] = {}
        self._clock = clock

    def get(self, integration_id: IntegrationId, kind: str, version: datetime) -> Any | None:
        entry = self._entries.get((integration_id, kind))
        if entry is None or entry.version != version or entry.expires_at <= self._clock():
            return None
        return entry.value

    def generation(self, integration_id: IntegrationId, kind: str) -> int:
        return self._generations.get((integration_id, kind), 0)

    def put(
        self,
        integration_id: IntegrationId,
        kind: str,
        version: datetime,
        value: Any,
        ttl: float,
        generation: int,
    ) -> None:
        if ttl <= 0 or self.generation(integration_id, kind) != generation:
            return
        self._entries[(integration_id, kind)] = _Entry(version, self._clock() + ttl, value)

    def invalidate(self, integration_id: IntegrationId, changed: str | None = None) -> None:
        """Drop what changed ("tools", "prompts", "resources"), or everything of the integration."""
        kinds = RELATED_KINDS.get(changed, ()) if changed else ("tools", "prompts", "resources", "resource_templates")
        for kind in kinds:
            key = (integration_id, kind)
            self._entries.pop(key, None)
            self._generations[key] = self._generations.get(key, 0) + 1
