"""Rate limits: an organization's runs per minute (REST, the OpenAI-compatible routes and /mcp tool calls all
start runs) and an API key's requests per minute. Over the limit: 429, Retry-After, the error shape, and
nothing created."""

from datetime import UTC, datetime
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from application.use_cases.organizations import SetOrganizationLimitsCommand
from infrastructure.container import Container
from infrastructure.limits.rate_limits import KeyRequestRate, MemoryWindows
from tests.conftest import MakeTenant, Tenant
from tests.e2e.runs import agent_and_thread
from tests.e2e.test_mcp_server import mcp_client, publish_agent, text_of
from tests.unit.fakes.ports import FixedClock


async def limited(container: Container, make_tenant: MakeTenant, runs_per_minute: int) -> Tenant:
    tenant = await make_tenant("Limited")
    await container.set_organization_limits().execute(
        SetOrganizationLimitsCommand(slug=tenant.slug, max_concurrent_runs=None, runs_per_minute=runs_per_minute)
    )
    return tenant


async def test_a_burst_over_the_runs_per_minute_gets_429_and_creates_nothing(
    client: httpx.AsyncClient, container: Container, make_tenant: MakeTenant
) -> None:
    tenant = await limited(container, make_tenant, runs_per_minute=2)
    threads = [(await agent_and_thread(client, tenant, model="threadline-offline"))[1] for _ in range(5)]
    answers = [
        await client.post(f"/v1/threads/{thread['id']}/runs", json={"input": "go"}, headers=tenant.admin)
        for thread in threads
    ]
    # Five in a burst: two per minute's window (four if the burst straddles two windows).
    assert 1 <= sum(a.status_code == 429 for a in answers) <= 3
    assert {a.status_code for a in answers} == {201, 429}
    for thread, answer in zip(threads, answers, strict=True):
        runs = (await client.get(f"/v1/threads/{thread['id']}/runs", headers=tenant.admin)).json()["data"]
        messages = (await client.get(f"/v1/threads/{thread['id']}/messages", headers=tenant.admin)).json()["data"]
        if answer.status_code == 201:
            assert len(runs) == 1
            continue
        assert answer.json()["error"] == "RateLimited" and "per minute" in answer.json()["detail"]
        assert 1 <= int(answer.headers["retry-after"]) <= 60
        assert runs == [] and messages == []  # nothing created: no run, not even the input message


async def test_another_organization_is_not_limited_by_one_over_its_limit(
    client: httpx.AsyncClient, container: Container, make_tenant: MakeTenant, tenant: Tenant
) -> None:
    busy = await limited(container, make_tenant, runs_per_minute=1)
    for org in (busy, busy, tenant, tenant, tenant):
        _agent, thread = await agent_and_thread(client, org, model="threadline-offline")
        answer = await client.post(f"/v1/threads/{thread['id']}/runs", json={"input": "go"}, headers=org.admin)
        if org is tenant:
            assert answer.status_code == 201, answer.text


async def test_the_openai_compatible_routes_count_as_runs(
    client: httpx.AsyncClient, container: Container, make_tenant: MakeTenant
) -> None:
    tenant = await limited(container, make_tenant, runs_per_minute=1)
    await agent_and_thread(client, tenant, model="threadline-offline", slug="helper")
    body: dict[str, Any] = {"model": "helper", "messages": [{"role": "user", "content": "hi"}]}
    answers = [await client.post("/v1/chat/completions", json=body, headers=tenant.admin) for _ in range(3)]
    refused = [a for a in answers if a.status_code == 429]
    assert refused and all(a.json()["error"]["code"] == "rate_limited" and a.headers["retry-after"] for a in refused)
    threads = (await client.get("/v1/threads?limit=100", headers=tenant.admin)).json()["data"]
    assert len(threads) == 1 + len(answers) - len(refused)  # the agent's own thread, and one per run created


async def test_mcp_tool_calls_count_as_runs(
    client: httpx.AsyncClient, live_url: str, container: Container, make_tenant: MakeTenant
) -> None:
    tenant = await limited(container, make_tenant, runs_per_minute=1)
    await publish_agent(client, tenant)
    async with mcp_client(live_url, tenant) as session:
        results = [await session.call_tool("echo-bot", {"input": "hello"}) for _ in range(3)]
    refused = [r for r in results if r.is_error]
    assert refused and all("runs per minute" in text_of(r.content[0]) for r in refused)
    threads = (await client.get("/v1/threads?limit=100", headers=tenant.admin)).json()["data"]
    assert len(threads) == len(results) - len(refused)


async def test_a_keys_requests_over_its_rate_get_429_before_anything_runs() -> None:
    handled: list[str] = []

    async def endpoint(request: Request) -> PlainTextResponse:
        handled.append(request.headers["authorization"])
        return PlainTextResponse("ok")

    inner = Starlette(routes=[Route("/v1/me", endpoint), Route("/healthz", endpoint)])
    windows, clock = MemoryWindows(), FixedClock(datetime(2026, 11, 24, 12, 0, 15, tzinfo=UTC))
    app = KeyRequestRate(inner, windows=lambda: windows, per_minute=3, clock=clock)
    transport = httpx.ASGITransport(app=app)
    key_one, key_two = {"Authorization": "Bearer key-one"}, {"Authorization": "Bearer key-two"}
    async with httpx.AsyncClient(transport=transport, base_url="http://threadline.test") as http:
        one = [await http.get("/v1/me", headers=key_one) for _ in range(5)]
        other = await http.get("/v1/me", headers=key_two)
        unlimited = await http.get("/healthz", headers=key_one)  # only /v1 and /mcp are counted
        clock.advance(45)  # the next minute's window
        next_minute = await http.get("/v1/me", headers=key_one)
    assert [a.status_code for a in one] == [200, 200, 200, 429, 429] and other.status_code == 200
    assert all(a.json()["error"] == "RateLimited" and a.headers["retry-after"] == "45" for a in one[3:])
    assert unlimited.status_code == 200 and next_minute.status_code == 200
    assert len(handled) == 3 + 1 + 1 + 1
