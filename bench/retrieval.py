"""Retrieval quality and source_query latency, on SQLite and PostgreSQL.

    .venv/bin/python -m bench.retrieval [--backends sqlite,postgresql] [--passages 10000] [--organizations 2]
        [--hybrid]

Quality: the shipped corpus (bench/retrieval_corpus: twelve handbooks, sixty questions each answered by one
section) is uploaded to a thread as Markdown files, and each question is asked of the thread's full-text
search; recall@5 is the share of questions whose section is among the first five passages, MRR the mean of
1/rank of that section (0 when not in the first ten).

Latency: each of --organizations organizations gets --passages passages (the corpus, and filler sources of
text drawn from a Zipf distribution over the corpus's words and made-up ones, as word frequencies go in natural
text; all in one thread), then every question is asked through the source_query tool handler as a run
calls it (one read-only unit of work, the search, the answer within its budget), several rounds; p50 and p95
in milliseconds.

Hybrid (--hybrid): the same, with every passage embedded by the deterministic embeddings server of the tests
(tests/fakes/embeddings_server.py: hashed word stems and trigrams, no model can be downloaded here), searches
merging full text and nearest vectors; its quality says the fusion works, not how good a real model would be.

PostgreSQL: a scratch database on THREADLINE_BENCH_POSTGRES_URL's server (default postgres@127.0.0.1:5432).
"""

import argparse
import asyncio
import json
import random
import re
import statistics
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, cast
from uuid import uuid4

from sqlalchemy import text

from application.caller import Caller
from application.ports.llm import ModelToolCall
from application.ports.persistence import SearchScope, UnitOfWork
from application.retrieval import EmbedPassages, PassageSearch
from application.runs.tools.handler import ToolContext
from application.runs.tools.native import SourceQuery
from application.use_cases.agents import CreateAgent, CreateAgentCommand
from application.use_cases.organizations import CreateOrganization, CreateOrganizationCommand
from application.use_cases.sources import UploadSource, UploadSourceCommand
from application.use_cases.threads import CreateThread, CreateThreadCommand
from bench._server import database
from domain.api_keys import Role
from domain.ids import OrgId, RunId
from domain.native_tools import NATIVE_TOOLS_BY_TYPE
from domain.tools import Tool, ToolType
from infrastructure.documents.fetcher import HttpFileFetcher
from infrastructure.documents.reader import FileDocumentReader
from infrastructure.llm.openai_embeddings import OpenAiEmbeddings
from infrastructure.outbound.guard import NetworkPolicy
from infrastructure.persistence import migrations
from infrastructure.persistence.engine import Database
from infrastructure.persistence.unit_of_work import SqlAlchemyUnitOfWork
from infrastructure.security.api_keys import Sha256KeyHasher
from infrastructure.system import SystemClock, Uuid7Generator
from infrastructure.tracing.noop import NoopRunTrace
from tests.fakes.embeddings_server import FakeEmbeddings

CORPUS = Path(__file__).with_name("retrieval_corpus")
PASSAGES_PER_FILLER = 100
FILLER_VOCABULARY = 30_000
"""Words the filler draws from: the corpus's own words, most frequent first, then made-up ones."""


@dataclass
class Tenant:
    org_id: OrgId
    caller: Caller
    thread_id: Any
    agent: Any


def _questions() -> list[dict[str, str]]:
    return list(json.loads((CORPUS / "questions.json").read_text()))


def _vocabulary() -> tuple[list[str], list[float]]:
    """Filler words with Zipf weights (the weight of the word of rank r is 1/r), as in natural text: the
    corpus's words by their frequency there, then made-up words up to FILLER_VOCABULARY."""
    counts: dict[str, int] = {}
    for path in CORPUS.glob("*.md"):
        for word in re.findall(r"[a-z]+", path.read_text().lower()):
            counts[word] = counts.get(word, 0) + 1
    words = sorted(counts, key=lambda w: -counts[w])
    rng = random.Random(7)
    while len(words) < FILLER_VOCABULARY:
        words.append("".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4))))
    return words, [1 / rank for rank in range(1, len(words) + 1)]


def _filler(rng: random.Random, number: int, vocabulary: tuple[list[str], list[float]]) -> bytes:
    """A Markdown file of PASSAGES_PER_FILLER paragraphs (each too long to share a passage), a heading every five."""
    words, weights = vocabulary
    lines = []
    for paragraph in range(PASSAGES_PER_FILLER):
        if paragraph % 5 == 0:
            lines.append(f"## Part {number}.{paragraph // 5} {' '.join(rng.choices(words, weights, k=2))}\n")
        lines.append(" ".join(rng.choices(words, weights, k=110)).capitalize() + ".\n")
    return "\n".join(lines).encode()


async def _tenant(uow: UnitOfWork, name: str) -> Tenant:
    clock, ids = SystemClock(), Uuid7Generator()
    created = await CreateOrganization(uow, clock, ids, Sha256KeyHasher()).execute(
        CreateOrganizationCommand(name=name, slug=None)
    )
    caller = Caller(org_id=created.organization.id, role=Role.ADMIN)
    agent = await CreateAgent(uow, clock, ids, "bench-model").execute(CreateAgentCommand(caller=caller, name="Reader"))
    thread = await CreateThread(uow, clock, ids).execute(CreateThreadCommand(caller=caller, agent_id=agent.id))
    return Tenant(org_id=created.organization.id, caller=caller, thread_id=thread.id, agent=agent)


async def _fill(uow: UnitOfWork, tenant: Tenant, passages: int, rng: random.Random) -> int:
    upload = UploadSource(
        uow,
        SystemClock(),
        Uuid7Generator(),
        FileDocumentReader(),
        HttpFileFetcher(NetworkPolicy()),
        max_source_bytes=10 * 1024 * 1024,
    )
    total = 0
    for path in sorted(CORPUS.glob("*.md")):
        if path.name == "README.md":
            continue
        command = UploadSourceCommand(thread_id=tenant.thread_id, name=path.name, content=path.read_bytes())
        total += (await upload.execute(tenant.caller, command)).passages
    number, vocabulary = 0, _vocabulary()
    while total < passages:
        command = UploadSourceCommand(
            thread_id=tenant.thread_id, name=f"filler-{number}.md", content=_filler(rng, number, vocabulary)
        )
        total += (await upload.execute(tenant.caller, command)).passages
        number += 1
    return total


async def _quality(search: PassageSearch, tenant: Tenant) -> tuple[float, float, list[str]]:
    found_at_5, reciprocal, missed = 0, 0.0, []
    scope = SearchScope(thread_id=tenant.thread_id, agent_id=tenant.agent.id)
    for question in _questions():
        found = await search.search(tenant.org_id, scope, question["question"], limit=10)
        assert found.note is None, found.note
        hits = found.hits
        ranks = [
            rank
            for rank, hit in enumerate(hits, start=1)
            if hit.source_name == question["source"] and (hit.passage.heading or "").endswith(question["heading"])
        ]
        if ranks and ranks[0] <= 5:
            found_at_5 += 1
        else:
            missed.append(question["question"])
        reciprocal += 1 / ranks[0] if ranks else 0.0
    count = len(_questions())
    return found_at_5 / count, reciprocal / count, missed


async def _latency(search: PassageSearch, tenant: Tenant, rounds: int) -> list[float]:
    spec = NATIVE_TOOLS_BY_TYPE[ToolType.SOURCE_QUERY]
    tool = Tool(name=spec.name, description="", parameters=spec.parameters, type=ToolType.SOURCE_QUERY, metadata={})
    context = ToolContext(
        org_id=tenant.org_id,
        run_id=RunId(uuid4()),
        thread_id=tenant.thread_id,
        agent=tenant.agent,
        trace=NoopRunTrace(),
    )
    handler = SourceQuery(search)
    timings = []
    for _ in range(rounds):
        for n, question in enumerate(_questions()):
            call = ModelToolCall(id=f"call_{n}", name="source_query", arguments={"query": question["question"]})
            start = time.perf_counter()
            outcome = await handler(call, tool, context)
            timings.append((time.perf_counter() - start) * 1000)
            assert not outcome.is_error, outcome.text
    return timings


async def _embed_all(uow: UnitOfWork, embeddings: OpenAiEmbeddings) -> float:
    """Embed every passage not embedded yet, as the background indexer does: how long it took (seconds)."""
    embed = EmbedPassages(uow, SystemClock(), embeddings, retry=timedelta(seconds=1))
    started = time.perf_counter()
    while await embed.execute():
        pass
    return time.perf_counter() - started


async def measure(
    url: str, passages: int, organizations: int, rounds: int, embeddings: OpenAiEmbeddings | None
) -> dict[str, Any]:
    await asyncio.to_thread(migrations.upgrade, url)
    db = Database(url, pool_size=2)
    try:
        # The use cases take the port; SqlAlchemyUnitOfWork.__aenter__'s annotation (Self) does not say it offers it.
        uow = cast(UnitOfWork, SqlAlchemyUnitOfWork(db))
        full_text = PassageSearch(uow, None)
        quality_tenant = await _tenant(uow, "Quality")
        await _fill(uow, quality_tenant, 0, random.Random(0))
        recall, mrr, missed = await _quality(full_text, quality_tenant)
        hybrid_figures: dict[str, Any] = {}
        if embeddings is not None:
            await _embed_all(uow, embeddings)
            hybrid_recall, hybrid_mrr, _ = await _quality(PassageSearch(uow, embeddings), quality_tenant)
            hybrid_figures = {"hybrid recall@5": round(hybrid_recall, 3), "hybrid mrr": round(hybrid_mrr, 3)}
        tenants, started = [], time.perf_counter()
        for n in range(organizations):
            tenant = await _tenant(uow, f"Load {n}")
            indexed = await _fill(uow, tenant, passages, random.Random(n + 1))
            tenants.append(tenant)
        load_seconds = time.perf_counter() - started
        if url.startswith("postgresql"):
            # The index as autovacuum keeps it on a live database: the GIN index's pending list merged (new
            # rows wait there, read in full by every search, until a vacuum) and the planner's statistics.
            async with db.engine.connect() as connection:
                autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
                await autocommit.execute(text("VACUUM ANALYZE source_passages"))
        await _latency(full_text, tenants[0], 1)  # warm the caches and the pool
        timings = await _latency(full_text, tenants[-1], rounds)
        timings.sort()
        if embeddings is not None:
            hybrid_figures["embedding seconds"] = round(await _embed_all(uow, embeddings), 1)
            hybrid = PassageSearch(uow, embeddings)
            await _latency(hybrid, tenants[0], 1)
            hybrid_timings = sorted(await _latency(hybrid, tenants[-1], rounds))
            hybrid_figures["hybrid source_query p50 ms"] = round(statistics.median(hybrid_timings), 2)
            hybrid_figures["hybrid source_query p95 ms"] = round(hybrid_timings[int(len(hybrid_timings) * 0.95)], 2)
        return {
            "recall@5": round(recall, 3),
            "mrr": round(mrr, 3),
            "missed": missed,
            "passages per organization": indexed,
            "organizations": organizations,
            "indexing seconds": round(load_seconds, 1),
            "source_query p50 ms": round(statistics.median(timings), 2),
            "source_query p95 ms": round(timings[int(len(timings) * 0.95)], 2),
            "queries": len(timings),
            **hybrid_figures,
        }
    finally:
        await db.dispose()


async def _measured(url: str, args: argparse.Namespace) -> dict[str, Any]:
    if not args.hybrid:
        return await measure(url, args.passages, args.organizations, args.rounds, None)
    async with FakeEmbeddings() as fake:
        embeddings = OpenAiEmbeddings(model=fake.model, api_key="sk-bench", base_url=fake.base_url)
        try:
            return await measure(url, args.passages, args.organizations, args.rounds, embeddings)
        finally:
            await embeddings.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--passages", type=int, default=10_000, help="passages per organization")
    parser.add_argument("--organizations", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5, help="times each question is asked for latency")
    parser.add_argument(
        "--hybrid", action="store_true", help="also measure hybrid search, with the deterministic embeddings server"
    )
    args = parser.parse_args()
    for backend in args.backends.split(","):
        with database(backend) as url:
            result = asyncio.run(_measured(url, args))
        missed = result.pop("missed")
        print(f"{backend}: " + ", ".join(f"{k} {v}" for k, v in result.items()))
        for question in missed:
            print(f"  not in the first five: {question}")


if __name__ == "__main__":
    main()
