"""API keys verified lately, kept in this process so a request need not read its key from the database.

A key is kept for a short time (THREADLINE_API_KEY_CACHE_SECONDS) and forgotten at once when it is revoked:
by the use case in the process that revoked it, and in every other process by the revocation notice
(key_revocations.py). On PostgreSQL nothing is kept while those notices cannot be received, since a
revocation made meanwhile would go unseen.
"""

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from domain.api_keys import ApiKey
from domain.ids import ApiKeyId, OrgId

MAX_KEYS = 10_000


@dataclass(frozen=True, slots=True)
class _Entry:
    key: ApiKey
    expires: float


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
        self._ttl, self._max, self._now = ttl_seconds, max_keys, monotonic
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._version = 0
        self._trusted = trusted

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, presented: str) -> ApiKey | None:
        if not self._trusted:
            return None
        digest = _digest(presented)
        entry = self._entries.get(digest)
        if entry is None:
            return None
        if self._now() >= entry.expires:
            del self._entries[digest]
            return None
        self._entries.move_to_end(digest)
        return entry.key

    def version(self) -> int:
        return self._version

    def remember(self, presented: str, key: ApiKey, *, as_of: int) -> None:
        if not self._trusted or as_of != self._version or self._ttl <= 0 or not key.is_active:
            return
        digest = _digest(presented)
        self._entries[digest] = _Entry(key=key, expires=self._now() + self._ttl)
        self._entries.move_to_end(digest)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def forget_key(self, key_id: ApiKeyId) -> None:
        self._forget(lambda key: key.id == key_id)

    def forget_organization(self, org_id: OrgId) -> None:
        self._forget(lambda key: key.org_id == org_id)

    def distrust(self) -> None:
        """Keep nothing, and answer nothing, until `trust`: revocations may be going unseen."""
        self._trusted = False
        self._forget(lambda _key: True)

    def trust(self) -> None:
        """Revocations are seen from now on; what was kept before may have missed some."""
        self._forget(lambda _key: True)
        self._trusted = True

    def _forget(self, matches: Callable[[ApiKey], bool]) -> None:
        self._version += 1  # a read that began before this may have seen what is forgotten now
        for digest in [d for d, entry in self._entries.items() if matches(entry.key)]:
            del self._entries[digest]


def _digest(presented: str) -> bytes:
    return hashlib.sha256(presented.encode()).digest()
