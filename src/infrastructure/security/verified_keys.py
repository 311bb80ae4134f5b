"""API keys verified lately, kept in this process so a request need not read its key from the database.

A key is kept for a short time (THREADLINE_API_KEY_CACHE_SECONDS) and forgotten at once when it is revoked:
by the use case in the process that revoked it, and in every other process by the revocation notice. On
PostgreSQL the notice is a NOTIFY (key_revocations.py), and nothing is kept while notices cannot be received,
since a revocation made meanwhile would go unseen. On SQLite it is a file next to the database
(RevocationStamp), which grows whenever a process forgets a key, the command line included; a process that
sees it changed forgets every key it kept.
"""

import hashlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.engine import make_url

from application.expiring import ExpiringMap
from domain.api_keys import ApiKey
from domain.ids import ApiKeyId, OrgId

MAX_KEYS = 10_000
logger = logging.getLogger(__name__)


class RevocationStamp:
    """A file next to a SQLite database that grows by a line whenever a process of that database forgets a key it
    revoked, once the revocation is committed. Each lookup of a kept key asks whether it grew since the last one:
    one stat of the file, microseconds, against a read of the key from the database."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._seen = self._now()

    def _now(self) -> tuple[int, int] | None:
        try:
            found = os.stat(self._path)
        except FileNotFoundError:
            return None
        except OSError:  # cannot tell: as if it changed every time
            return (-1, time.monotonic_ns())
        return found.st_ino, found.st_size

    def changed(self) -> bool:
        now = self._now()
        if now == self._seen:
            return False
        self._seen = now
        return True

    def mark(self) -> None:
        """Tell the other processes: a line more (appends from several processes at once each add theirs)."""
        try:
            with open(self._path, "ab") as stamp:
                stamp.write(b"a key was revoked\n")
        except OSError as error:
            logger.error(
                "other processes of this database could not be told of a revoked key (%s): they may accept it "
                "until their verified keys expire",
                error,
            )


def revocation_stamp(database_url: str) -> RevocationStamp | None:
    """The stamp of a SQLite database in a file; None for PostgreSQL (its notices travel by NOTIFY) and for a
    database in memory (one process only)."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return RevocationStamp(Path(f"{url.database}-revoked"))


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
        stamp: RevocationStamp | None = None,
    ) -> None:
        self._kept: ExpiringMap[bytes, ApiKey] = ExpiringMap(
            ttl_seconds=ttl_seconds, max_entries=max_keys, monotonic=monotonic
        )
        self._trusted = trusted
        self.stamp = stamp
        """SQLite's revocation notices (see RevocationStamp); None on PostgreSQL, whose listener forgets keys."""

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, presented: str) -> ApiKey | None:
        if not self._trusted:
            return None
        if self.stamp is not None and self.stamp.changed():  # another process revoked a key
            self._kept.forget(lambda _digest, _key: True)
            return None
        return self._kept.get(_digest(presented))

    def version(self) -> int:
        return self._kept.version()

    def remember(self, presented: str, key: ApiKey, *, as_of: int) -> None:
        if self._trusted and key.is_active:
            self._kept.put([(_digest(presented), key)], as_of=as_of)

    def forget_key(self, key_id: ApiKeyId) -> None:
        """Called where the key was revoked, after the commit (and by PostgreSQL's listener)."""
        self._kept.forget(lambda _digest, key: key.id == key_id)
        if self.stamp is not None:
            self.stamp.mark()

    def forget_organization(self, org_id: OrgId) -> None:
        self._kept.forget(lambda _digest, key: key.org_id == org_id)
        if self.stamp is not None:
            self.stamp.mark()

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
