"""Passages of sources and their full-text search: FTS5 with bm25 on SQLite, a tsvector with
ts_rank_cd on PostgreSQL (both kept up to date by triggers of migration 0011)."""

import itertools
import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Integer,
    Text,
    cast,
    column,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy import table as sql_table
from sqlalchemy.dialects.postgresql import REGCONFIG, TSQUERY, TSVECTOR
from sqlalchemy.sql import Select

from application.ports.persistence import PassageHit, SearchScope
from domain.ids import OrgId, SourceId
from domain.sources import Passage, Source
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.tables import organizations, source_passages, sources

table = source_passages
_WORDS = re.compile(r"\w+", re.UNICODE)
# SQLite's FTS5 has no stop words: these would match nearly every passage and slow every search down.
_STOP_WORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "does", "for", "from", "had", "has",
        "have", "how", "i", "if", "in", "into", "is", "it", "its", "of", "on", "or", "that", "the", "their",
        "there", "these", "this", "those", "to", "was", "were", "what", "when", "where", "which", "who", "whom",
        "why", "will", "with", "you", "your",
    }
)  # fmt: skip
_SNIPPET_WORDS = 32
_LEXEME = re.compile(r"'(?:[^']|'')+'")
_PLAIN_WORDS = re.compile(r"'(?:[^']|'')+'(?: & '(?:[^']|'')+')*")
"""websearch_to_tsquery's text for plain words: quoted lexemes joined by &"""
_HIGHLIGHT = ("**", "**")


def passage_of_row(row: Any) -> Passage:
    return Passage(position=row.position, text=row.text, heading=row.heading, page=row.page, row=row.table_row)


def fts5_query(text: str) -> str:
    """A MATCH expression from any text: each word quoted (so nothing a user types is FTS5 syntax),
    any of them may match, bm25 ranks passages with more and rarer ones first."""
    words = [w.lower() for w in _WORDS.findall(text)]
    kept = [w for w in words if w not in _STOP_WORDS] or words
    return " OR ".join(f'"{w}"' for w in dict.fromkeys(kept))


class SqlPassageRepository:
    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def replace(self, source: Source, passages: Sequence[Passage]) -> None:
        await self._conn.execute(delete(table).where(table.c.org_id == source.org_id, table.c.source_id == source.id))
        if not passages:
            return
        await self._conn.execute(
            insert(table),
            [
                {
                    "org_id": source.org_id,
                    "source_id": source.id,
                    "thread_id": source.thread_id,
                    "agent_id": source.agent_id,
                    "position": p.position,
                    "heading": p.heading,
                    "page": p.page,
                    "table_row": p.row,
                    "text": p.text,
                }
                for p in passages
            ],
        )

    async def list(self, org_id: OrgId, source_id: SourceId, *, limit: int, after: int | None) -> Sequence[Passage]:
        query = (
            select(table)
            .where(table.c.org_id == org_id, table.c.source_id == source_id)
            .order_by(table.c.position)
            .limit(limit)
        )
        if after is not None:
            query = query.where(table.c.position > after)
        return [passage_of_row(row) for row in await self._conn.execute(query)]

    async def unindexed(self, *, limit: int, after: SourceId | None) -> Sequence[tuple[OrgId, SourceId]]:
        query = (
            select(sources.c.org_id, sources.c.id)
            .where(
                or_(sources.c.text.is_not(None), sources.c.data.is_not(None)),
                ~select(table.c.id).where(table.c.source_id == sources.c.id).exists(),
            )
            .order_by(sources.c.id)
            .limit(limit)
        )
        if after is not None:
            query = query.where(sources.c.id > after)
        return [(OrgId(row.org_id), SourceId(row.id)) for row in await self._conn.execute(query)]

    async def language_changed(self, org_id: OrgId) -> None:
        if self._conn.dialect.name == "postgresql":  # the trigger computes the vector in the stored language
            await self._conn.execute(update(table).where(table.c.org_id == org_id).values(heading=table.c.heading))

    async def search(self, org_id: OrgId, scope: SearchScope, query: str, *, limit: int) -> Sequence[PassageHit]:
        if not _WORDS.search(query):
            return []
        conditions = [table.c.org_id == org_id, *scope_conditions(scope)]
        postgres = self._conn.dialect.name == "postgresql"
        words = await self._lexemes(org_id, query) if postgres else _fts5_words(query)
        # Ranking every passage that holds any one word of a question is slow on a large index (common words
        # are in thousands): rank those holding three of its words first, then two, and all only if too few.
        for needed in _NARROWING:
            if len(words) >= needed + 2 and len(words) <= _MAX_NARROWED[needed]:
                narrowed = _postgres_narrowed(words, needed) if postgres else _fts5_narrowed(words, needed)
                statement = (
                    _postgres(org_id, query, conditions, limit, narrowed)
                    if postgres
                    else _sqlite(narrowed, conditions, limit)
                )
                hits = _hits(await self._conn.execute(statement))
                if len(hits) >= limit:
                    return hits
        if postgres:
            return _hits(await self._conn.execute(_postgres(org_id, query, conditions, limit)))
        return _hits(await self._conn.execute(_sqlite(fts5_query(query), conditions, limit)))

    async def _lexemes(self, org_id: OrgId, query: str) -> Sequence[str]:
        """The query's lexemes as websearch_to_tsquery finds them (quoted), when the query is plain words
        (no phrase, or, -not: those are searched as the user wrote them)."""
        parsed = await self._conn.scalar(select(cast(func.websearch_to_tsquery(_config(org_id), query), Text)))
        if not parsed or not _PLAIN_WORDS.fullmatch(parsed):
            return []
        return list(dict.fromkeys(_LEXEME.findall(parsed)))


_NARROWING = (3, 2)
"""How many of the query's words a passage holds, in the narrowed searches tried first"""
_MAX_NARROWED = {3: 10, 2: 14}
"""The most words a query may have for each narrowed search (their combinations make its terms)"""


def _fts5_words(text: str) -> list[str]:
    words = [w.lower() for w in _WORDS.findall(text)]
    return list(dict.fromkeys(w for w in words if w not in _STOP_WORDS))


def _fts5_narrowed(words: Sequence[str], needed: int) -> str:
    return " OR ".join(
        "(" + " AND ".join(f'"{w}"' for w in combination) + ")" for combination in itertools.combinations(words, needed)
    )


def _postgres_narrowed(lexemes: Sequence[str], needed: int) -> str:
    return " | ".join("(" + " & ".join(combination) + ")" for combination in itertools.combinations(lexemes, needed))


def _hits(rows: Any) -> list[PassageHit]:
    return [
        PassageHit(
            source_id=SourceId(row.source_id),
            source_name=row.source_name,
            passage=passage_of_row(row),
            snippet=row.snippet or row.text[:300],
            score=float(row.score),
        )
        for row in rows
    ]


def _sqlite(match: str, conditions: Sequence[ColumnElement[bool]], limit: int) -> Select[Any]:
    # The FTS5 table, and its name as the hidden column MATCH, bm25 and snippet take.
    fts_table = sql_table("source_passages_fts", column("rowid", Integer))
    fts: ColumnElement[Any] = literal_column("source_passages_fts")
    # bm25 is lower for better matches; a heading's words count twice as much as the text's.
    rank = func.bm25(fts, 2.0, 1.0)
    return (
        select(
            *table.c,
            sources.c.name.label("source_name"),
            func.snippet(fts, 1, *_HIGHLIGHT, "…", _SNIPPET_WORDS).label("snippet"),
            (-rank).label("score"),
        )
        .select_from(fts_table)
        .join(table, table.c.id == fts_table.c.rowid)
        .join(sources, sources.c.id == table.c.source_id)
        .where(fts.op("MATCH")(match), *conditions)
        .order_by(rank)
        .limit(limit)
    )


def _config(org_id: OrgId) -> ColumnElement[Any]:
    """The organization's text search configuration."""
    language = select(organizations.c.search_language).where(organizations.c.id == org_id)
    return cast(language.scalar_subquery(), REGCONFIG)


def _postgres(
    org_id: OrgId, query: str, conditions: Sequence[ColumnElement[bool]], limit: int, candidates: str | None = None
) -> Select[Any]:
    def terms() -> ColumnElement[Any]:
        # websearch_to_tsquery reads any text safely ("quotes", or, -not); its ANDs become ORs so a question
        # finds the passages holding most of its words (ranked by cover density), not only those holding all.
        parsed = func.websearch_to_tsquery(_config(org_id), query)
        return cast(func.replace(cast(parsed, Text), " & ", " | "), TSQUERY)

    vector = literal_column("source_passages.search_vector", TSVECTOR)
    rank = func.ts_rank_cd(vector, terms()).cast(Float)
    matching = terms() if candidates is None else cast(candidates, TSQUERY)
    best = (
        select(table.c.id, rank.label("score"))
        .where(vector.op("@@")(matching), *conditions)
        .order_by(rank.desc())
        .limit(limit)
        .subquery()
    )
    # The headline of the few best passages only: ts_headline reads the whole text, too slow for every match.
    headline = func.ts_headline(
        _config(org_id), table.c.text, terms(), f"MaxWords={_SNIPPET_WORDS},MinWords=12,StartSel=**,StopSel=**"
    )
    return (
        select(*table.c, sources.c.name.label("source_name"), headline.label("snippet"), best.c.score)
        .join(best, best.c.id == table.c.id)
        .join(sources, sources.c.id == table.c.source_id)
        .order_by(best.c.score.desc(), table.c.id)
    )


def scope_conditions(scope: SearchScope) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if scope.thread_id is not None and scope.agent_id is not None:
        conditions.append(or_(table.c.thread_id == scope.thread_id, table.c.agent_id == scope.agent_id))
    elif scope.thread_id is not None:
        conditions.append(table.c.thread_id == scope.thread_id)
    elif scope.agent_id is not None:
        conditions.append(table.c.agent_id == scope.agent_id)
    if scope.source_id is not None:
        conditions.append(table.c.source_id == scope.source_id)
    return conditions
