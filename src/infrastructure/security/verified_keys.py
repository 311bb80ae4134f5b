"""API keys verified lately, kept in this process so a request need not read its key from the database.

A key is kept for a short time (THREADLINE_API_KEY_CACHE_SECONDS) and forgotten at once when it is revoked:
by the use case in the process that revoked it, and in every other process by the revocation notice
(key_revocations.py). On PostgreSQL nothing is kept while those notices cannot be received, since a
revocation made meanwhile would go unseen.
"""

import hashlib
import time
from collections.abc import Callable

from application.expiring import ExpiringMap
from domain.api_keys import ApiKey
from domain.ids import ApiKeyId, OrgId

MAX_KEYS = 10_000


class VerifiedKeyCache:
    """By the SHA-256 of the secret presented: a hit means this very secret was verified against the stored
    hash. Only verified keys enter, at most `max_keys` (the least recently used leave first), so presenting
    unknown secrets takes no memory."""

    def __init__(
        self,
        *,
        ttl_seconds: float,
        trusted: bool = False,
        max_keys: int = MAX_KEYS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kept: ExpiringMap[bytes, ApiKey] = ExpiringMap(
            ttl_seconds=ttl_seconds, max_entries=max_keys, monotonic=monotonic
        )
        self._trusted = trusted

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, presented: str) -> ApiKey | None:
        return self._kept.get(_digest(presented)) if self._trusted else None

    def version(self) -> int:
        return self._kept.version()

    def remember(self, presented: str, key: ApiKey, *, as_of: int) -> None:
        if self._trusted and key.is_active:
            self._kept.put([(_digest(presented), key)], as_of=as_of)

    def forget_key(self, key_id: ApiKeyId) -> None:
        self._kept.forget(lambda _digest, key: key.id == key_id)

    def forget_organization(self, org_id: OrgId) -> None:
        self._kept.forget(lambda _digest, key: key.org_id == org_id)

    def distrust(self) -> None:
        """Keep nothing, and answer nothing, until `trust`: revocations may be going unseen."""
        self._trusted = False
        self._kept.forget(lambda _digest, _key: True)

    def trust(self) -> None:
        """Revocations are seen from now on; what was kept before may have missed some."""
        self._kept.forget(lambda _digest, _key: True)
        self._trusted = True


def _digest(presented: str) -> bytes:
    return hashlib.sha256(presented.encode()).digest()
