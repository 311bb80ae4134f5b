"""Passage vectors kept in memory between searches, per organization and embeddings model, while they are
current: a search reads how many vectors the organization has and when the newest was stored (one indexed
aggregate) and reads them all again only when that changed. The least recently searched are let go past a
memory budget."""

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import numpy as np
import numpy.typing as npt

DEFAULT_MAX_BYTES = 256 * 1024 * 1024

Version = tuple[int, datetime | None]
"""How many vectors, and when the newest was stored: any vector stored or deleted changes it."""


@dataclass(frozen=True, kw_only=True)
class OrgVectors:
    """One organization's vectors of one model, with the thread, agent and source of each passage (as codes)."""

    version: Version
    passage_ids: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]
    threads: npt.NDArray[np.int32]
    agents: npt.NDArray[np.int32]
    sources: npt.NDArray[np.int32]
    codes: dict[UUID, int]
    """Code of each thread, agent and source id (-1: none)"""

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.passage_ids.nbytes + 3 * self.threads.nbytes)

    def code(self, value: UUID | None) -> int:
        return -2 if value is None else self.codes.get(value, -2)  # -2 matches no passage


class VectorCache:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._max_bytes = max_bytes
        self._entries: OrderedDict[tuple[UUID, str, int], OrgVectors] = OrderedDict()
        self._bytes = 0

    def get(self, key: tuple[UUID, str, int], version: Version) -> OrgVectors | None:
        found = self._entries.get(key)
        if found is None or found.version != version:
            return None
        self._entries.move_to_end(key)
        return found

    def put(self, key: tuple[UUID, str, int], vectors: OrgVectors) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes
        if vectors.nbytes > self._max_bytes:
            return
        self._entries[key] = vectors
        self._bytes += vectors.nbytes
        while self._bytes > self._max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.nbytes
