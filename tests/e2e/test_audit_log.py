"""The audit log: each admin action leaves exactly one event (who, when, which object, what changed) and no secret;
only admins read it, page by page, filtered by type and object, and only their own organization's."""

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.conftest import MakeTenant, Tenant, member_headers
from tests.fakes.mcp_server import FakeMcpServer

Json = dict[str, Any]
CREDENTIAL = "sk-first-credential-QvZkTw"
NEW_CREDENTIAL = "sk-second-credential-JmXwRy"
CHATMD = '<config model="gpt-test"/>\n<system>You check things.</system>\n<user>Check {thing}</user>\n'


async def events(client: httpx.AsyncClient, tenant: Tenant, **query: str) -> list[Json]:
    """Every event of the tenant's log matching the query, following the pages."""
    found: list[Json] = []
    cursor: str | None = None
    while True:
        params = query | {"limit": "2"} | ({"cursor": cursor} if cursor else {})
        page = await client.get("/v1/audit-events", params=params, headers=tenant.admin)
        assert page.status_code == 200, page.text
        found += page.json()["data"]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return found


@dataclass
class Admin:
    """An admin driving the API; `ids` keeps the objects it made, by name."""

    client: httpx.AsyncClient
    tenant: Tenant
    mcp_url: str
    ids: dict[str, str]

    async def call(self, method: str, path: str, body: Json | None = None) -> Json:
        response = await self.client.request(method, path, json=body, headers=self.tenant.admin)
        assert response.status_code in (200, 201, 204), response.text
        return response.json() if response.content else {}


Step = Callable[[Admin], Awaitable[None]]


async def create_key(a: Admin) -> None:
    created = await a.call("POST", "/v1/api-keys", {"name": "ci", "role": "member"})
    a.ids["key"], a.ids["key secret"] = created["id"], created["key"]


async def revoke_key(a: Admin) -> None:
    await a.call("POST", f"/v1/api-keys/{a.ids['key']}/revoke")


async def create_agent(a: Admin) -> None:
    a.ids["agent"] = (await a.call("POST", "/v1/agents", {"name": "Reviewer", "model": "gpt-test"}))["id"]


async def change_agent(a: Admin) -> None:
    await a.call("PATCH", f"/v1/agents/{a.ids['agent']}", {"instructions": "Review carefully.", "max_steps": 5})


async def import_agent(a: Admin) -> None:
    imported = await a.call("POST", "/v1/agents/import", {"file_name": "checker.chatmd", "content": CHATMD})
    a.ids["imported"] = imported["agent"]["id"]


async def delete_agent(a: Admin) -> None:
    await a.call("DELETE", f"/v1/agents/{a.ids['imported']}")


async def create_integration(a: Admin) -> None:
    body = {"name": "Memo", "url": a.mcp_url, "auth_type": "bearer", "credentials": CREDENTIAL}
    a.ids["integration"] = (await a.call("POST", "/v1/mcp-integrations", body))["id"]


async def change_integration(a: Admin) -> None:
    await a.call("PATCH", f"/v1/mcp-integrations/{a.ids['integration']}", {"name": "Memo server", "timeout_seconds": 9})


async def change_credentials(a: Admin) -> None:
    await a.call("PATCH", f"/v1/mcp-integrations/{a.ids['integration']}", {"credentials": NEW_CREDENTIAL})


async def disable_integration(a: Admin) -> None:
    await a.call("POST", f"/v1/mcp-integrations/{a.ids['integration']}/disable")


async def enable_integration(a: Admin) -> None:
    await a.call("POST", f"/v1/mcp-integrations/{a.ids['integration']}/enable")


async def check_integration(a: Admin) -> None:
    await a.call("POST", f"/v1/mcp-integrations/{a.ids['integration']}/test")


async def delete_integration(a: Admin) -> None:
    await a.call("DELETE", f"/v1/mcp-integrations/{a.ids['integration']}")


async def create_template(a: Admin) -> None:
    body = {
        "name": "check",
        "description": "Check a thing",
        "arguments": [{"name": "thing", "required": True}],
        "messages": [{"role": "user", "content": "Check {thing}"}],
        "agent_id": a.ids["agent"],
    }
    await a.call("POST", "/v1/prompt-templates", body)


async def change_template(a: Admin) -> None:
    await a.call("PATCH", "/v1/prompt-templates/check", {"description": "Check a thing twice"})


async def delete_template(a: Admin) -> None:
    await a.call("DELETE", "/v1/prompt-templates/check")


# Every admin route that changes something, in an order where each finds what it needs; with the event it writes
# and the fields that event must name.
ADMIN_ACTIONS: list[tuple[Step, str, set[str]]] = [
    (create_key, "api_key.created", {"name", "role"}),
    (revoke_key, "api_key.revoked", {"revoked_at"}),
    (create_agent, "agent.created", {"name", "model"}),
    (change_agent, "agent.updated", {"instructions", "max_steps"}),
    (import_agent, "agent.created", {"name", "instructions"}),
    (delete_agent, "agent.deleted", {"name"}),
    (create_integration, "integration.created", {"name", "url", "credentials"}),
    (change_integration, "integration.updated", {"name", "timeout_seconds"}),
    (change_credentials, "integration.credentials_changed", {"credentials"}),
    (disable_integration, "integration.disabled", {"enabled"}),
    (enable_integration, "integration.enabled", {"enabled"}),
    (check_integration, "integration.tested", {"connection_status"}),
    (create_template, "prompt_template.created", {"name", "messages"}),
    (change_template, "prompt_template.updated", {"description"}),
    (delete_template, "prompt_template.deleted", {"name"}),
    (delete_integration, "integration.deleted", {"name"}),
]


@dataclass
class Walk:
    admin: Admin
    written: list[list[Json]]
    """The events each action added, in ADMIN_ACTIONS' order."""
    admin_key_id: str
    opening: list[Json]
    """The log as it was before the first action: the organization's creation."""


@pytest.fixture
async def walk(client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer) -> Walk:
    """The admin routes, one after the other, with the log read after each."""
    admin = Admin(client, tenant, mcp_server.url, {})
    written: list[list[Json]] = []
    opening = await events(client, tenant)
    seen = len(opening)
    for step, _, _ in ADMIN_ACTIONS:
        await step(admin)
        log = await events(client, tenant)
        written.append(log[seen:])
        seen = len(log)
    me = (await client.get("/v1/me", headers=tenant.admin)).json()
    return Walk(admin, written, me["api_key_id"], opening)


async def test_every_admin_action_writes_exactly_one_event(walk: Walk) -> None:
    assert [len(added) for added in walk.written] == [1] * len(ADMIN_ACTIONS)
    assert [added[0]["action"] for added in walk.written] == [action for _, action, _ in ADMIN_ACTIONS]


async def test_the_log_opens_with_the_operator_creating_the_organization(tenant: Tenant, walk: Walk) -> None:
    (event,) = walk.opening
    assert (event["action"], event["object_id"], event["actor_key_id"]) == ("organization.created", tenant.id, None)
    changed = {c["field"]: c["new"] for c in event["changes"]}
    assert changed["slug"] == tenant.slug and changed["first_admin_key_id"] == walk.admin_key_id
    assert tenant.admin["Authorization"].removeprefix("Bearer ") not in json.dumps(event)


async def test_each_event_says_who_changed_which_object_and_what_changed(walk: Walk) -> None:
    for (event,), (step, action, fields) in zip(walk.written, ADMIN_ACTIONS, strict=True):
        assert event["actor_key_id"] == walk.admin_key_id, step.__name__
        assert event["object_type"] == action.partition(".")[0], step.__name__
        assert fields <= {c["field"] for c in event["changes"]}, step.__name__
        assert event["at"], step.__name__


async def test_an_update_shows_old_and_new_values(walk: Walk) -> None:
    changed = next(e for (e,) in walk.written if e["action"] == "agent.updated")
    assert {c["field"]: (c["old"], c["new"]) for c in changed["changes"]} == {
        "instructions": ("", "Review carefully."),
        "max_steps": (20, 5),
    }
    assert changed["object_id"] == walk.admin.ids["agent"]


async def test_no_event_holds_a_secret(walk: Walk) -> None:
    logged = json.dumps(walk.written)
    for secret in (CREDENTIAL, NEW_CREDENTIAL, walk.admin.ids["key secret"], CREDENTIAL[-4:], NEW_CREDENTIAL[-4:]):
        assert secret not in logged
    credentials = [c for (e,) in walk.written for c in e["changes"] if c["field"] == "credentials"]
    assert {c["new"] for c in credentials} <= {"[redacted]", None}


async def test_events_are_filtered_by_type_and_object(client: httpx.AsyncClient, tenant: Tenant, walk: Walk) -> None:
    integration = walk.admin.ids["integration"]
    about = await events(client, tenant, object_type="integration", object_id=integration)
    assert [e["action"].partition(".")[2] for e in about] == [
        "created",
        "updated",
        "credentials_changed",
        "disabled",
        "enabled",
        "tested",
        "deleted",
    ]
    assert [e["object_id"] for e in await events(client, tenant, type="api_key.revoked")] == [walk.admin.ids["key"]]
    everything = await events(client, tenant)
    assert [e["id"] for e in everything] == sorted(e["id"] for e in everything)


async def test_another_organization_sees_none_of_the_events(
    client: httpx.AsyncClient, make_tenant: MakeTenant, walk: Walk
) -> None:
    other = await make_tenant("Other")
    assert [(e["action"], e["object_id"]) for e in await events(client, other)] == [("organization.created", other.id)]
    assert await events(client, other, object_id=walk.admin.ids["integration"]) == []


async def test_members_may_not_read_the_log(client: httpx.AsyncClient, tenant: Tenant) -> None:
    refused = await client.get("/v1/audit-events", headers=await member_headers(client, tenant))
    assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied"


async def test_a_member_creating_an_agent_is_the_events_actor(client: httpx.AsyncClient, tenant: Tenant) -> None:
    member = await member_headers(client, tenant)
    created = await client.post("/v1/agents", json={"name": "Helper"}, headers=member)
    assert created.status_code == 201
    me = (await client.get("/v1/me", headers=member)).json()
    (event,) = await events(client, tenant, type="agent.created")
    assert (event["object_id"], event["actor_key_id"]) == (created.json()["id"], me["api_key_id"])


@pytest.mark.parametrize(
    "query", [{"cursor": "not-a-cursor"}, {"type": "agent.exploded"}, {"object_type": "thread"}], ids=str
)
async def test_a_filter_or_cursor_it_does_not_know_is_refused(
    client: httpx.AsyncClient, tenant: Tenant, query: dict[str, str]
) -> None:
    refused = await client.get("/v1/audit-events", params=query, headers=tenant.admin)
    assert refused.status_code in (400, 422) and {"error", "detail"} <= set(refused.json())
