"""Passage embeddings, ranked in process: the organization's vectors (kept in memory while current, see
vector_cache.py) are compared with the query's at once (numpy), then the best passages in scope are read whole."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
import numpy.typing as npt
from sqlalchemy import bindparam, func, literal, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from application.ports.persistence import EmbeddingState, PassageHit, PassageToEmbed, SearchScope
from domain.ids import OrgId, SourceId
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.repositories.passages import passage_of_row
from infrastructure.persistence.tables import passage_vectors, source_passages, sources
from infrastructure.persistence.vector_cache import OrgVectors, VectorCache, Version

vectors, passages = passage_vectors, source_passages
SNIPPET_CHARS = 300
"""A passage found by its meaning alone has no highlighted words: its opening is the snippet."""


class SqlPassageVectorRepository:
    def __init__(self, connection: UnitConnection, cache: VectorCache) -> None:
        self._conn, self._cache = connection, cache

    async def newest_passage(self) -> int:
        return int(await self._conn.scalar(select(func.coalesce(func.max(passages.c.id), 0))) or 0)

    async def take(self, model: str, *, limit: int, now: datetime, hold_until: datetime) -> Sequence[PassageToEmbed]:
        released = (
            select(vectors.c.passage_id)
            .where(vectors.c.model == model, vectors.c.vector.is_(None), vectors.c.held_until < now)
            .order_by(vectors.c.passage_id)
            .limit(limit)
        )
        # A hold that ended is taken again; on PostgreSQL a process that took it meanwhile makes this skip it
        # (the row is read again after the other's commit, and its hold no longer ended).
        retaken = await self._conn.execute(
            update(vectors)
            .where(
                vectors.c.model == model,
                vectors.c.vector.is_(None),
                vectors.c.held_until < now,
                vectors.c.passage_id.in_(released.scalar_subquery()),
            )
            .values(held_until=hold_until)
            .returning(vectors.c.passage_id)
        )
        taken = [int(row.passage_id) for row in retaken]
        if len(taken) < limit:
            unseen = (
                select(passages.c.id, literal(model), passages.c.org_id, passages.c.source_id, literal(hold_until))
                .where(
                    ~select(vectors.c.passage_id)
                    .where(vectors.c.passage_id == passages.c.id, vectors.c.model == model)
                    .exists()
                )
                .order_by(passages.c.id)
                .limit(limit - len(taken))
            )
            insert = pg_insert if self._conn.dialect.name == "postgresql" else sqlite_insert
            claimed = await self._conn.execute(
                insert(vectors)
                .from_select(["passage_id", "model", "org_id", "source_id", "held_until"], unseen)
                .on_conflict_do_nothing()
                .returning(vectors.c.passage_id)
            )
            taken += [int(row.passage_id) for row in claimed]
        if not taken:
            return []
        rows = await self._conn.execute(
            select(passages.c.id, passages.c.heading, passages.c.text)
            .where(passages.c.id.in_(taken))
            .order_by(passages.c.id)
        )
        return [
            PassageToEmbed(id=row.id, text=f"{row.heading}\n\n{row.text}" if row.heading else row.text) for row in rows
        ]

    async def store(self, model: str, stored: Sequence[tuple[int, bytes]], *, now: datetime) -> None:
        if not stored:
            return
        await self._conn.execute(
            update(vectors)
            .where(vectors.c.passage_id == bindparam("id"), vectors.c.model == model)
            .values(vector=bindparam("blob"), embedded_at=now, held_until=None, error=None),
            [{"id": passage_id, "blob": blob} for passage_id, blob in stored],
        )

    async def failed(self, model: str, passage_ids: Sequence[int], error: str, *, retry_at: datetime) -> None:
        await self._conn.execute(
            update(vectors)
            .where(vectors.c.model == model, vectors.c.passage_id.in_(passage_ids), vectors.c.vector.is_(None))
            .values(held_until=retry_at, error=error[:2000])
        )

    async def nearest(
        self, org_id: OrgId, scope: SearchScope, model: str, vector: bytes, *, limit: int
    ) -> Sequence[PassageHit]:
        stored = await self._vectors(org_id, model, dimensions=len(vector) // 4)
        if stored is None:
            return []
        mask = np.ones(len(stored.passage_ids), dtype=bool)
        thread, agent = stored.code(scope.thread_id), stored.code(scope.agent_id)
        if scope.thread_id is not None and scope.agent_id is not None:
            mask &= (stored.threads == thread) | (stored.agents == agent)
        elif scope.thread_id is not None:
            mask &= stored.threads == thread
        elif scope.agent_id is not None:
            mask &= stored.agents == agent
        if scope.source_id is not None:
            mask &= stored.sources == stored.code(scope.source_id)
        candidates = np.flatnonzero(mask)
        if not len(candidates):
            return []
        similarity = stored.matrix[candidates] @ np.frombuffer(vector, dtype="<f4")
        count = min(limit, len(candidates))
        best = np.argpartition(-similarity, count - 1)[:count]
        scores = {int(stored.passage_ids[candidates[i]]): float(similarity[i]) for i in best}
        found = await self._conn.execute(
            select(*passages.c, sources.c.name.label("source_name"))
            .join(sources, sources.c.id == passages.c.source_id)
            .where(passages.c.org_id == org_id, passages.c.id.in_(list(scores)))
        )
        hits = [_hit(row, scores[row.id]) for row in found]
        return sorted(hits, key=lambda hit: (-hit.score, hit.source_id, hit.passage.position))

    async def _vectors(self, org_id: OrgId, model: str, *, dimensions: int) -> OrgVectors | None:
        """The organization's vectors of the model, from memory while they are current."""
        of_org = (vectors.c.org_id == org_id, vectors.c.model == model, vectors.c.vector.is_not(None))
        counted = (await self._conn.execute(select(func.count(), func.max(vectors.c.embedded_at)).where(*of_org))).one()
        version: Version = (int(counted[0]), counted[1])
        if not version[0]:
            return None
        key = (org_id, model, dimensions)
        cached = self._cache.get(key, version)
        if cached is not None:
            return cached
        rows = [
            row
            for row in await self._conn.execute(
                select(
                    vectors.c.passage_id,
                    vectors.c.vector,
                    passages.c.thread_id,
                    passages.c.agent_id,
                    passages.c.source_id,
                )
                .join(passages, passages.c.id == vectors.c.passage_id)
                .where(*of_org)
            )
            if len(row.vector) == dimensions * 4  # a model's dimensions never change
        ]
        codes: dict[UUID, int] = {}

        def coded(values: Sequence[UUID | None]) -> npt.NDArray[np.int32]:
            return np.array([-1 if v is None else codes.setdefault(v, len(codes)) for v in values], dtype=np.int32)

        loaded = OrgVectors(
            version=version,
            passage_ids=np.array([row.passage_id for row in rows], dtype=np.int64),
            matrix=np.frombuffer(b"".join(row.vector for row in rows), dtype="<f4").reshape(len(rows), dimensions),
            threads=coded([row.thread_id for row in rows]),
            agents=coded([row.agent_id for row in rows]),
            sources=coded([row.source_id for row in rows]),
            codes=codes,
        )
        self._cache.put(key, loaded)
        return loaded

    async def state(self, org_id: OrgId, source_id: SourceId, model: str | None) -> EmbeddingState:
        count = await self._conn.scalar(
            select(func.count()).where(passages.c.org_id == org_id, passages.c.source_id == source_id)
        )
        if model is None:
            return EmbeddingState(passages=int(count or 0), embedded=0, failed=0)
        row = (
            await self._conn.execute(
                select(func.count(vectors.c.vector), func.count(vectors.c.error), func.max(vectors.c.error)).where(
                    vectors.c.org_id == org_id, vectors.c.source_id == source_id, vectors.c.model == model
                )
            )
        ).one()
        return EmbeddingState(passages=int(count or 0), embedded=int(row[0]), failed=int(row[1]), error=row[2])


def _hit(row: Any, score: float) -> PassageHit:
    return PassageHit(
        source_id=SourceId(row.source_id),
        source_name=row.source_name,
        passage=passage_of_row(row),
        snippet=row.text[:SNIPPET_CHARS],
        score=score,
    )
