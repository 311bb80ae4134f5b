"""Usage accounting: every model call's tokens and tool calls, per organization, agent, model and day, agree with
the usage each run shows; only admins read it, and only their own organization's."""

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.conftest import MakeTenant, Tenant, member_headers
from tests.e2e.runs import agent_and_thread, settle, start
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, TextReply, ToolCallsReply

Json = dict[str, Any]
COUNTERS = ("input_tokens", "output_tokens", "cached_tokens", "total_tokens", "model_calls", "tool_calls", "runs")


async def usage(client: httpx.AsyncClient, tenant: Tenant, **query: str) -> Json:
    response = await client.get("/v1/usage", params=query, headers=tenant.admin)
    assert response.status_code == 200, response.text
    body: Json = response.json()
    return body


async def run_once(client: httpx.AsyncClient, tenant: Tenant, thread: Json, text: str) -> Json:
    return await settle(client, tenant, (await start(client, tenant, thread, input=text))["id"])


@pytest.fixture
async def runs(client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI) -> list[Json]:
    """Four runs of two agents on two models: one calls a tool (two model calls), the provider reports cached
    tokens for some calls and not for others."""
    _, writer = await agent_and_thread(client, tenant, name="Writer", model="gpt-writer")
    _, checker = await agent_and_thread(client, tenant, name="Checker", model="gpt-checker")
    openai.script(
        TextReply("First draft", prompt_tokens=120, completion_tokens=30, cached_tokens=100),
        ToolCallsReply([FakeToolCall("no_such_tool", {"q": "x"})], prompt_tokens=200, completion_tokens=12),
        TextReply("Checked", prompt_tokens=260, completion_tokens=8, cached_tokens=200),
        TextReply("Second draft", prompt_tokens=150, completion_tokens=40),
        TextReply("Fine", prompt_tokens=90, completion_tokens=3, cached_tokens=0),
    )
    done = [
        await run_once(client, tenant, writer, "Write"),
        await run_once(client, tenant, checker, "Check with a tool"),
        await run_once(client, tenant, writer, "Write again"),
        await run_once(client, tenant, checker, "Check again"),
    ]
    assert [r["status"] for r in done] == ["completed"] * 4
    return done


def _sum(runs: list[Json], field: str) -> int:
    return sum(int(r["usage"][field]) for r in runs)


@pytest.mark.executors()
async def test_the_totals_are_the_sum_of_the_runs_usage(
    client: httpx.AsyncClient, tenant: Tenant, runs: list[Json]
) -> None:
    totals = (await usage(client, tenant))["totals"]
    for field in ("input_tokens", "output_tokens", "total_tokens"):
        assert totals[field] == _sum(runs, field)
    assert totals["input_tokens"] == 120 + 200 + 260 + 150 + 90
    assert totals["cached_tokens"] == 300
    assert (totals["model_calls"], totals["tool_calls"], totals["runs"]) == (5, 1, 4)


async def test_runs_at_the_same_time_are_all_counted(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    openai.responder = lambda _body: TextReply("ok", prompt_tokens=7, completion_tokens=3, cached_tokens=2)
    threads = [(await agent_and_thread(client, tenant, name=f"Agent {n % 3}"))[1] for n in range(12)]
    started = await asyncio.gather(*(start(client, tenant, t, input="Go") for t in threads))
    done = await asyncio.gather(*(settle(client, tenant, r["id"]) for r in started))
    totals = (await usage(client, tenant))["totals"]
    assert totals["total_tokens"] == _sum(done, "total_tokens") == 12 * 10
    assert (totals["cached_tokens"], totals["model_calls"], totals["runs"]) == (24, 12, 12)


async def test_a_run_shows_the_cached_tokens_its_model_calls_reported(runs: list[Json]) -> None:
    assert [r["usage"]["cached_tokens"] for r in runs] == [100, 200, 0, 0]


async def test_usage_by_model_and_by_agent_adds_up_to_each_ones_runs(
    client: httpx.AsyncClient, tenant: Tenant, runs: list[Json]
) -> None:
    writer_runs, checker_runs = [runs[0], runs[2]], [runs[1], runs[3]]
    by_model = {line["key"]: line for line in (await usage(client, tenant, group_by="model"))["data"]}
    assert set(by_model) == {"gpt-writer", "gpt-checker"}
    assert by_model["gpt-writer"]["total_tokens"] == _sum(writer_runs, "total_tokens")
    assert by_model["gpt-checker"]["total_tokens"] == _sum(checker_runs, "total_tokens")
    assert (by_model["gpt-checker"]["model_calls"], by_model["gpt-checker"]["tool_calls"]) == (3, 1)
    by_agent = {line["key"]: line for line in (await usage(client, tenant, group_by="agent"))["data"]}
    assert by_agent[runs[0]["agent_id"]]["input_tokens"] == _sum(writer_runs, "input_tokens")
    assert by_agent[runs[1]["agent_id"]]["output_tokens"] == _sum(checker_runs, "output_tokens")
    assert {line["runs"] for line in by_agent.values()} == {2}


async def test_usage_by_day_counts_today_and_nothing_outside_the_range(
    client: httpx.AsyncClient, tenant: Tenant, runs: list[Json]
) -> None:
    today = datetime.now(UTC).date()
    by_day = await usage(client, tenant, group_by="day", to=today.isoformat())
    assert [line["key"] for line in by_day["data"]] == [today.isoformat()]
    assert by_day["data"][0]["total_tokens"] == _sum(runs, "total_tokens")
    assert (by_day["from"], by_day["to"]) == ((today - timedelta(days=29)).isoformat(), today.isoformat())
    yesterday = (today - timedelta(days=1)).isoformat()
    before = await usage(client, tenant, **{"from": yesterday, "to": yesterday})
    assert before["data"] == [] and before["totals"]["total_tokens"] == 0


async def test_usage_stays_when_the_runs_thread_is_deleted(
    client: httpx.AsyncClient, tenant: Tenant, runs: list[Json]
) -> None:
    deleted = await client.delete(f"/v1/threads/{runs[0]['thread_id']}", headers=tenant.admin)
    assert deleted.status_code == 204
    assert (await usage(client, tenant))["totals"]["total_tokens"] == _sum(runs, "total_tokens")


async def test_another_organization_sees_none_of_it(
    client: httpx.AsyncClient, make_tenant: MakeTenant, runs: list[Json]
) -> None:
    other = await make_tenant("Other")
    seen = await usage(client, other, group_by="model")
    assert seen["data"] == [] and all(seen["totals"][c] == 0 for c in COUNTERS)


async def test_members_may_not_read_usage(client: httpx.AsyncClient, tenant: Tenant) -> None:
    refused = await client.get("/v1/usage", headers=await member_headers(client, tenant))
    assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied"


@pytest.mark.parametrize(
    "query",
    [{"from": "2026-02-10", "to": "2026-02-01"}, {"from": "2020-01-01", "to": "2026-01-01"}, {"group_by": "week"}],
    ids=["from after to", "over a year", "unknown grouping"],
)
async def test_a_range_or_grouping_it_cannot_report_is_refused(
    client: httpx.AsyncClient, tenant: Tenant, query: dict[str, str]
) -> None:
    refused = await client.get("/v1/usage", params=query, headers=tenant.admin)
    assert refused.status_code == 422 and {"error", "detail"} <= set(refused.json())
