"""Sources searched by meaning too: with an embeddings model configured, passages are embedded in the background
(a source shows how far), searches merge full-text and nearest-vector rankings, and a failing embeddings model
never fails a search: its passages are retried, and searches fall back to full text meanwhile.

The model is a deterministic embeddings server on 127.0.0.1 (tests/fakes/embeddings_server.py): its vectors
share features between words that share parts ("hosepipe", "hoses"), where full-text stemming does not."""

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import httpx
import pytest
from dependency_injector import providers

from application.ports.persistence import PassageHit, SearchScope
from application.retrieval import EmbedPassages, PassageSearch
from domain.ids import OrgId, ThreadId
from infrastructure.container import Container
from infrastructure.execution.passage_indexer import PassageIndexer
from infrastructure.llm.openai_embeddings import OpenAiEmbeddings
from tests.conftest import Tenant, as_port
from tests.e2e.test_sources import MARKDOWN, new_thread, upload
from tests.fakes.embeddings_server import FakeEmbeddings

Json = dict[str, Any]


@pytest.fixture(scope="module")
async def embeddings() -> AsyncIterator[FakeEmbeddings]:
    async with FakeEmbeddings() as fake:
        yield fake


@pytest.fixture(scope="module")
async def hybrid(
    container: Container, client: httpx.AsyncClient, embeddings: FakeEmbeddings
) -> AsyncIterator[httpx.AsyncClient]:
    """The suite's API with embeddings on (THREADLINE_EMBEDDINGS_MODEL and the rest), and the background indexer
    `serve` starts then, looking for new passages every 50 ms and retrying failed ones after 200 ms."""
    model = OpenAiEmbeddings(model=embeddings.model, api_key="sk-embeddings", base_url=embeddings.base_url)
    container.embeddings.override(providers.Object(model))
    retry = timedelta(seconds=0.2)
    container.embed_passages.override(
        providers.Factory(EmbedPassages, uow=container.uow, clock=container.clock, embeddings=model, retry=retry)
    )
    indexer = PassageIndexer(container.embed_passages, poll_seconds=0.05, retry_seconds=0.2)
    await indexer.start()
    try:
        yield client
    finally:
        await indexer.stop()
        container.embed_passages.reset_override()
        container.embeddings.reset_override()
        await model.aclose()


async def full_text(container: Container, tenant: Tenant, thread: str, q: str) -> list[PassageHit]:
    """What a deployment without embeddings finds."""
    scope = SearchScope(thread_id=ThreadId(UUID(thread)))
    found = await PassageSearch(as_port(container.uow()), None).search(OrgId(UUID(tenant.id)), scope, q, limit=10)
    return list(found.hits)


async def indexing(client: httpx.AsyncClient, tenant: Tenant, source_id: str, until: str) -> Json:
    """The source's indexing once its embeddings are `until` (the test fails after 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        shown = await client.get(f"/v1/sources/{source_id}", headers=tenant.admin)
        assert shown.status_code == 200, shown.text
        state: Json = shown.json()["indexing"]
        if state["embeddings"] == until:
            return state
        assert time.monotonic() < deadline, f"still {state} after 30 s"
        await asyncio.sleep(0.02)


async def search(client: httpx.AsyncClient, tenant: Tenant, thread: str, q: str) -> Json:
    found = await client.get(f"/v1/threads/{thread}/sources/search", params={"q": q}, headers=tenant.admin)
    assert found.status_code == 200, found.text
    result: Json = found.json()
    return result


async def test_passages_are_embedded_and_found_by_meaning(
    hybrid: httpx.AsyncClient, container: Container, tenant: Tenant
) -> None:
    thread = await new_thread(hybrid, tenant)
    uploaded = await upload(hybrid, tenant, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)
    assert uploaded.status_code == 201, uploaded.text
    assert uploaded.json()["indexing"] == {"passages": 3, "embeddings": "pending", "embedded": 0, "error": None}
    source_id = uploaded.json()["source"]["id"]
    ready = await indexing(hybrid, tenant, source_id, "ready")
    assert ready == {"passages": 3, "embeddings": "ready", "embedded": 3, "error": None}

    assert await full_text(container, tenant, thread, "hosepipe") == []
    found = await search(hybrid, tenant, thread, "hosepipe")
    assert found["mode"] == "hybrid" and found["note"] is None
    assert found["data"][0]["passage"]["heading"] == "Garden handbook > Watering"
    assert found["data"][0]["snippet"].startswith("Water the tomato beds")

    both = await search(hybrid, tenant, thread, "where do the hoses live?")  # words and meaning agree
    assert both["data"][0]["passage"]["heading"] == "Garden handbook > Watering"
    assert "**hoses**" in both["data"][0]["snippet"]

    # A source embedded after a search is found by the next one (vectors kept in memory are read again).
    later = await upload(hybrid, tenant, f"/v1/threads/{thread}/sources", "sheds.txt", b"Hoses hang in the sheds.")
    await indexing(hybrid, tenant, later.json()["source"]["id"], "ready")
    again = await search(hybrid, tenant, thread, "hosepipe")
    assert again["data"][0]["source_name"] == "sheds.txt"


async def test_a_failing_embeddings_model_is_retried_and_searches_go_on(
    hybrid: httpx.AsyncClient, embeddings: FakeEmbeddings, tenant: Tenant
) -> None:
    thread = await new_thread(hybrid, tenant)
    embeddings.failing = True
    try:
        uploaded = await upload(hybrid, tenant, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)
        source_id = uploaded.json()["source"]["id"]
        failed = await indexing(hybrid, tenant, source_id, "failed")
        assert failed["embedded"] == 0 and "503" in failed["error"] and "overloaded" in failed["error"]
        found = await search(hybrid, tenant, thread, "where do the hoses live?")
        assert found["mode"] == "full_text" and "embeddings model failed" in found["note"]
        assert found["data"][0]["passage"]["heading"] == "Garden handbook > Watering"
        assert "sk-embeddings" not in failed["error"] + found["note"]
    finally:
        embeddings.failing = False
    recovered = await indexing(hybrid, tenant, source_id, "ready")
    assert (recovered["embedded"], recovered["error"]) == (3, None)


async def test_another_organizations_passages_are_never_near(
    hybrid: httpx.AsyncClient, make_tenant: Any, tenant: Tenant
) -> None:
    thread = await new_thread(hybrid, tenant)
    uploaded = await upload(hybrid, tenant, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)
    await indexing(hybrid, tenant, uploaded.json()["source"]["id"], "ready")
    other = await make_tenant("Other")
    their_thread = await new_thread(hybrid, other)
    theirs = await upload(hybrid, other, f"/v1/threads/{their_thread}/sources", "notes.txt", b"Bees like lavender.")
    await indexing(hybrid, other, theirs.json()["source"]["id"], "ready")
    found = await search(hybrid, other, their_thread, "hosepipe garden watering tomato")
    assert found["mode"] == "hybrid"
    assert {hit["source_name"] for hit in found["data"]} == {"notes.txt"}


async def test_a_deleted_source_takes_its_vectors(hybrid: httpx.AsyncClient, tenant: Tenant) -> None:
    thread = await new_thread(hybrid, tenant)
    uploaded = await upload(hybrid, tenant, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)
    source_id = uploaded.json()["source"]["id"]
    await indexing(hybrid, tenant, source_id, "ready")
    deleted = await hybrid.delete(f"/v1/sources/{source_id}", headers=tenant.admin)
    assert deleted.status_code == 204
    found = await search(hybrid, tenant, thread, "hosepipe")
    assert (found["mode"], found["data"]) == ("hybrid", [])
