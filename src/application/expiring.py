"""A small map of what was read lately, kept in this process: entries expire after a time, the least recently
used leave first beyond a size, and a version tells a reader whether anything was forgotten while it read."""

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class _Entry(Generic[V]):
    value: V
    expires: float


class ExpiringMap(Generic[K, V]):
    def __init__(
        self, *, ttl_seconds: float, max_entries: int, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl, self._max, self._now = ttl_seconds, max_entries, monotonic
        self._entries: OrderedDict[K, _Entry[V]] = OrderedDict()
        self._version = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self._now() >= entry.expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry.value

    def version(self) -> int:
        """Taken before the values are read, and given back to `put`."""
        return self._version

    def put(self, items: Iterable[tuple[K, V]], *, as_of: int) -> None:
        """Keep values just read, unless anything was forgotten since `as_of` (the read may predate the change)."""
        if as_of != self._version or self._ttl <= 0:
            return
        expires = self._now() + self._ttl
        for key, value in items:
            self._entries[key] = _Entry(value=value, expires=expires)
            self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def forget(self, matches: Callable[[K, V], bool]) -> None:
        """Forget what matches; a read that began before this may have seen it, so its values are not kept."""
        self._version += 1
        for key in [k for k, entry in self._entries.items() if matches(k, entry.value)]:
            del self._entries[key]
