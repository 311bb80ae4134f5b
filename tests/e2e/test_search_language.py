"""The language an organization's sources are searched in: an admin sets it, its passages are indexed again in
it at once (PostgreSQL stems words in it), the audit log tells, and nobody else may change it."""

import httpx
import pytest

from tests.conftest import Tenant, member_headers
from tests.databases import backend
from tests.e2e.test_sources import new_thread, search, upload

FRENCH = "Les chevaux dorment dans l'écurie, près du grand pré.".encode()


async def test_an_admin_sets_the_search_language_and_the_log_tells(client: httpx.AsyncClient, tenant: Tenant) -> None:
    shown = await client.get("/v1/organization", headers=tenant.admin)
    assert shown.status_code == 200 and shown.json()["search_language"] == "english"
    changed = await client.patch("/v1/organization", json={"search_language": "french"}, headers=tenant.admin)
    assert changed.status_code == 200, changed.text
    assert changed.json()["search_language"] == "french"
    me = await client.get("/v1/me", headers=tenant.admin)
    assert me.json()["organization"]["search_language"] == "french"
    log = await client.get(
        "/v1/audit-events", params={"type": "organization.search_language_changed"}, headers=tenant.admin
    )
    [event] = log.json()["data"]
    assert event["changes"] == [{"field": "search_language", "old": "english", "new": "french"}]


async def test_only_known_languages_and_only_admins(client: httpx.AsyncClient, tenant: Tenant) -> None:
    unknown = await client.patch("/v1/organization", json={"search_language": "klingon"}, headers=tenant.admin)
    assert unknown.status_code == 422
    assert "klingon" in unknown.json()["detail"] and "french" in unknown.json()["detail"]
    member = await client.patch(
        "/v1/organization", json={"search_language": "german"}, headers=await member_headers(client, tenant)
    )
    assert member.status_code == 403 and member.json()["error"] == "PermissionDenied"
    nulled = await client.patch("/v1/organization", json={"search_language": None}, headers=tenant.admin)
    assert nulled.status_code == 422
    kept = await client.get("/v1/organization", headers=tenant.admin)
    assert kept.json()["search_language"] == "english"


@pytest.mark.skipif(backend() != "postgresql", reason="SQLite's index stems English words whatever the language")
async def test_passages_already_indexed_are_searched_in_the_new_language(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    thread = await new_thread(client, tenant)
    uploaded = await upload(client, tenant, f"/v1/threads/{thread}/sources", "ecurie.txt", FRENCH, "text/plain")
    assert uploaded.status_code == 201, uploaded.text
    assert await search(client, tenant, thread, "cheval") == []  # English does not know chevaux is cheval
    changed = await client.patch("/v1/organization", json={"search_language": "french"}, headers=tenant.admin)
    assert changed.status_code == 200, changed.text
    [hit] = await search(client, tenant, thread, "cheval")
    assert hit["source_name"] == "ecurie.txt" and "**chevaux**" in hit["snippet"]
