"""Finding the passages that answer a query: full-text search, and with an embeddings model, hybrid search
(full-text and nearest vectors, merged by reciprocal rank fusion); and embedding passages in the background.

A query searches in full text alone when no embeddings model is configured, and also when the model fails to
embed the query (the answer says so): search never fails because the embeddings model is down. Passages not
embedded yet are found by their words meanwhile."""

import logging
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from application.errors import EmbeddingsUnavailable
from application.ports.embeddings import Embeddings
from application.ports.persistence import EmbeddingState, PassageHit, SearchScope, UnitOfWork
from application.ports.system import Clock
from domain.ids import OrgId, SourceId

logger = logging.getLogger(__name__)

RRF_K = 60
"""Reciprocal rank fusion's constant: a passage scores 1/(RRF_K + rank) in each ranking that holds it."""
CANDIDATES = 20
"""Passages each ranking proposes to the fusion, at least (more when more are asked for)."""


class SearchMode(StrEnum):
    """How a search ranked passages: by their words (full text), or by their words and meaning (hybrid)."""

    FULL_TEXT = "full_text"
    HYBRID = "hybrid"


@dataclass(frozen=True, kw_only=True)
class Retrieved:
    hits: Sequence[PassageHit]
    mode: SearchMode
    note: str | None = None
    """Why a hybrid search fell back to full text, if it did"""


def vector_bytes(values: Sequence[float]) -> bytes:
    """A vector as stored and compared: scaled to unit length (so a dot product is the cosine), float32."""
    norm = math.sqrt(math.fsum(v * v for v in values))
    if not values or norm == 0 or not math.isfinite(norm):
        raise EmbeddingsUnavailable("the embeddings model answered an empty or zero vector")
    return struct.pack(f"<{len(values)}f", *(v / norm for v in values))


def fuse(rankings: Sequence[Sequence[PassageHit]], limit: int) -> list[PassageHit]:
    """Reciprocal rank fusion: each passage scores the sum of 1/(RRF_K + rank) over the rankings holding it;
    its snippet is the first ranking's that has one (full text highlights the query's words)."""
    scores: dict[tuple[SourceId, int], float] = {}
    first: dict[tuple[SourceId, int], PassageHit] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, start=1):
            key = (hit.source_id, hit.passage.position)
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank)
            first.setdefault(key, hit)
    best = sorted(scores, key=lambda key: -scores[key])[:limit]
    return [
        PassageHit(
            source_id=first[key].source_id,
            source_name=first[key].source_name,
            passage=first[key].passage,
            snippet=first[key].snippet,
            score=scores[key],
        )
        for key in best
    ]


class PassageSearch:
    """The passages of a scope that best answer a query, best first (see the module)."""

    def __init__(self, uow: UnitOfWork, embeddings: Embeddings | None) -> None:
        self._uow, self._embeddings = uow, embeddings

    @property
    def hybrid(self) -> bool:
        return self._embeddings is not None

    async def search(self, org_id: OrgId, scope: SearchScope, query: str, *, limit: int) -> Retrieved:
        if self._embeddings is None:
            async with self._uow.read_only() as uow:
                hits = await uow.passages.search(org_id, scope, query, limit=limit)
            return Retrieved(hits=hits, mode=SearchMode.FULL_TEXT)
        try:
            [values] = await self._embeddings.embed([query])
            vector = vector_bytes(values)
        except (EmbeddingsUnavailable, ValueError) as error:
            note = f"searched in full text only: the embeddings model failed ({error})"
            logger.warning("query not embedded", extra={"error": str(error)})
            async with self._uow.read_only() as uow:
                hits = await uow.passages.search(org_id, scope, query, limit=limit)
            return Retrieved(hits=hits, mode=SearchMode.FULL_TEXT, note=note)
        candidates = max(CANDIDATES, 2 * limit)
        async with self._uow.read_only() as uow:
            words = await uow.passages.search(org_id, scope, query, limit=candidates)
            meaning = await uow.passage_vectors.nearest(org_id, scope, self._embeddings.model, vector, limit=candidates)
        return Retrieved(hits=fuse([words, meaning], limit), mode=SearchMode.HYBRID)


class EmbedPassages:
    """Embeds a batch of the passages that have no vector for the model yet, across organizations. Passages are
    held while they are embedded (another process takes others); after a failure they are retried later, and
    their sources show the error meanwhile."""

    BATCH = 64
    HOLD = timedelta(minutes=5)
    """How long a process may take to embed a batch before another may take it"""

    def __init__(self, uow: UnitOfWork, clock: Clock, embeddings: Embeddings, retry: timedelta) -> None:
        self._uow, self._clock, self._embeddings = uow, clock, embeddings
        self._retry = retry
        """How long a batch that failed waits before it is tried again"""

    async def newest_passage(self) -> int:
        async with self._uow.read_only() as uow:
            return await uow.passage_vectors.newest_passage()

    async def execute(self) -> int:
        """Embed one batch: how many passages were taken (0: none is waiting)."""
        model, now = self._embeddings.model, self._clock.now()
        async with self._uow as uow:
            taken = await uow.passage_vectors.take(model, limit=self.BATCH, now=now, hold_until=now + self.HOLD)
            await uow.commit()
        if not taken:
            return 0
        try:
            vectors = await self._embeddings.embed([p.text for p in taken])
            if len(vectors) != len(taken):
                raise EmbeddingsUnavailable(f"the embeddings model answered {len(vectors)} vectors for {len(taken)}")
            stored = [(p.id, vector_bytes(v)) for p, v in zip(taken, vectors, strict=True)]
        except EmbeddingsUnavailable as error:
            logger.warning("passages not embedded", extra={"passages": len(taken), "error": error.detail})
            async with self._uow as uow:
                retry_at = self._clock.now() + self._retry
                await uow.passage_vectors.failed(model, [p.id for p in taken], error.detail, retry_at=retry_at)
                await uow.commit()
            raise
        async with self._uow as uow:
            await uow.passage_vectors.store(model, stored, now=self._clock.now())
            await uow.commit()
        return len(taken)


class EmbeddingStatus(StrEnum):
    """How far a source's passages are embedded."""

    OFF = "off"
    """No embeddings model is configured: passages are found by their words only"""
    PENDING = "pending"
    READY = "ready"
    FAILED = "failed"
    """The last attempt failed for some passages; they are tried again"""


@dataclass(frozen=True, kw_only=True)
class SourceIndexing:
    """How far a source is indexed: in full text at once, by embeddings in the background (when configured)."""

    passages: int
    embeddings: EmbeddingStatus
    embedded: int = 0
    error: str | None = None


def indexing_of(state: EmbeddingState, *, embeddings_enabled: bool) -> SourceIndexing:
    if not embeddings_enabled:
        return SourceIndexing(passages=state.passages, embeddings=EmbeddingStatus.OFF)
    if state.embedded >= state.passages:
        status = EmbeddingStatus.READY
    elif state.failed:
        status = EmbeddingStatus.FAILED
    else:
        status = EmbeddingStatus.PENDING
    return SourceIndexing(passages=state.passages, embeddings=status, embedded=state.embedded, error=state.error)
