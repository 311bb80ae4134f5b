"""The clock and id generator the use cases are given."""

import os
import threading
import time
from datetime import UTC, datetime
from uuid import UUID


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class Uuid7Generator:
    """UUIDv7 (RFC 9562): a millisecond timestamp, then a counter, then random bits.

    Ids sort by creation time, and within one process strictly increase, so id-ordered
    lists and cursors follow creation order.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = 0
        self._counter = 0

    def new(self) -> UUID:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms > self._last_ms:
                self._last_ms = ms
                self._counter = int.from_bytes(os.urandom(2), "big") & 0x3FF  # leave room to count up
            else:
                self._counter += 1
                if self._counter > 0xFFF:  # 4096 ids in one millisecond: borrow the next one
                    self._last_ms += 1
                    self._counter = 0
            ms, counter = self._last_ms, self._counter
        value = (ms & 0xFFFF_FFFF_FFFF) << 80
        value |= 0x7 << 76 | counter << 64
        value |= 0b10 << 62 | int.from_bytes(os.urandom(8), "big") >> 2
        return UUID(int=value)
