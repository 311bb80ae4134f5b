import asyncio
import base64
from typing import Any

import httpx

from infrastructure.container import Container
from tests.conftest import MakeTenant, Tenant


async def create_thread(client: httpx.AsyncClient, tenant: Tenant, **fields: object) -> dict[str, Any]:
    response = await client.post("/v1/threads", json=fields, headers=tenant.admin)
    assert response.status_code == 201, response.text
    thread: dict[str, Any] = response.json()
    return thread


async def test_a_thread_keeps_messages_in_the_order_appended(client: httpx.AsyncClient, tenant: Tenant) -> None:
    thread = await create_thread(client, tenant, title="Planning", metadata={"customer": "42"})
    assert thread["message_count"] == 0 and thread["metadata"] == {"customer": "42"}

    texts = [f"message {i}" for i in range(5)]
    for text in texts:
        response = await client.post(
            f"/v1/threads/{thread['id']}/messages", json={"content": text}, headers=tenant.admin
        )
        assert response.status_code == 201
        assert response.json()["role"] == "user"

    page = (await client.get(f"/v1/threads/{thread['id']}/messages", headers=tenant.admin)).json()
    assert [m["content"][0]["text"] for m in page["data"]] == texts
    assert [m["position"] for m in page["data"]] == [1, 2, 3, 4, 5]
    fetched = (await client.get(f"/v1/threads/{thread['id']}", headers=tenant.admin)).json()
    assert fetched["message_count"] == 5


async def test_concurrent_appends_all_land_with_distinct_positions(client: httpx.AsyncClient, tenant: Tenant) -> None:
    thread = await create_thread(client, tenant)
    url = f"/v1/threads/{thread['id']}/messages"
    responses = await asyncio.gather(
        *(client.post(url, json={"content": f"m{i}"}, headers=tenant.admin) for i in range(20))
    )
    assert all(r.status_code == 201 for r in responses)
    messages, cursor = [], None
    while True:
        params = {"limit": 7} | ({"cursor": cursor} if cursor else {})
        page = (await client.get(url, params=params, headers=tenant.admin)).json()
        messages += page["data"]
        if not (cursor := page["next_cursor"]):
            break
    assert [m["position"] for m in messages] == list(range(1, 21))
    assert sorted(m["content"][0]["text"] for m in messages) == sorted(f"m{i}" for i in range(20))


async def test_messages_take_text_and_image_parts(client: httpx.AsyncClient, tenant: Tenant) -> None:
    thread = await create_thread(client, tenant)
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    content = [
        {"type": "text", "text": "What is in these pictures?"},
        {"type": "image", "url": "https://example.org/cat.png"},
        {"type": "image", "data": png, "mime_type": "image/png"},
    ]
    response = await client.post(
        f"/v1/threads/{thread['id']}/messages", json={"content": content}, headers=tenant.admin
    )
    assert response.status_code == 201
    assert response.json()["content"] == content


async def test_bad_messages_are_refused_and_nothing_is_stored(client: httpx.AsyncClient, tenant: Tenant) -> None:
    thread = await create_thread(client, tenant)
    url = f"/v1/threads/{thread['id']}/messages"
    body: dict[str, Any]
    for body in (
        {},
        {"content": ""},
        {"content": []},
        {"content": 5},
        {"content": [{"type": "tool_use", "id": "x", "name": "y"}]},
        {"content": [{"type": "image"}]},
        {"content": [{"type": "image", "url": "ftp://x"}]},
        {"content": [{"type": "image", "data": "%%%", "mime_type": "image/png"}]},
        {"content": [{"type": "image", "data": "aGk=", "mime_type": "text/html"}]},
        {"content": "hi", "role": "assistant"},
        {"content": "hi", "extra": 1},
    ):
        response = await client.post(url, json=body, headers=tenant.admin)
        assert response.status_code == 422, (body, response.text)
        assert set(response.json()) == {"error", "detail"}
    assert (await client.get(url, headers=tenant.admin)).json()["data"] == []


async def test_threads_bind_to_agents_of_the_same_organization(
    client: httpx.AsyncClient, make_tenant: MakeTenant
) -> None:
    mine, theirs = await make_tenant(), await make_tenant()
    agent = (await client.post("/v1/agents", json={"name": "A"}, headers=theirs.admin)).json()
    response = await client.post("/v1/threads", json={"agent_id": agent["id"]}, headers=mine.admin)
    assert response.status_code == 422
    assert response.json()["error"] == "InvalidReference"


async def test_threads_filter_by_agent_and_outlive_it(client: httpx.AsyncClient, tenant: Tenant) -> None:
    agent = (await client.post("/v1/agents", json={"name": "A"}, headers=tenant.admin)).json()
    bound = await create_thread(client, tenant, agent_id=agent["id"])
    await create_thread(client, tenant)
    listed = (await client.get("/v1/threads", params={"agent_id": agent["id"]}, headers=tenant.admin)).json()
    assert [t["id"] for t in listed["data"]] == [bound["id"]]

    await client.delete(f"/v1/agents/{agent['id']}", headers=tenant.admin)
    after = (await client.get(f"/v1/threads/{bound['id']}", headers=tenant.admin)).json()
    assert after["agent_id"] is None


async def test_deleting_a_thread_deletes_its_messages(client: httpx.AsyncClient, tenant: Tenant) -> None:
    thread = await create_thread(client, tenant)
    await client.post(f"/v1/threads/{thread['id']}/messages", json={"content": "hi"}, headers=tenant.admin)
    assert (await client.delete(f"/v1/threads/{thread['id']}", headers=tenant.admin)).status_code == 204
    assert (await client.get(f"/v1/threads/{thread['id']}", headers=tenant.admin)).status_code == 404
    assert (await client.get(f"/v1/threads/{thread['id']}/messages", headers=tenant.admin)).status_code == 404


async def test_thread_input_is_checked(client: httpx.AsyncClient, tenant: Tenant) -> None:
    for body in (
        {"title": "x" * 501},
        {"metadata": {f"k{i}": "v" for i in range(17)}},
        {"metadata": {"k": 1}},
        {"metadata": {"": "v"}},
        {"agent_id": "nope"},
        {"colour": "red"},
    ):
        response = await client.post("/v1/threads", json=body, headers=tenant.admin)
        assert response.status_code == 422, body


async def test_oversized_bodies_are_refused(client: httpx.AsyncClient, tenant: Tenant, container: Container) -> None:
    limit = container.settings().max_request_bytes
    thread = await create_thread(client, tenant)
    response = await client.post(
        f"/v1/threads/{thread['id']}/messages",
        content=b'{"content": "' + b"a" * limit + b'"}',
        headers=tenant.admin | {"content-type": "application/json"},
    )
    assert response.status_code == 413
    assert response.json()["error"] == "RequestTooLarge"
