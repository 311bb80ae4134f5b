"""Followers of runs over real HTTP: whoever subscribes, whenever, gets every event once, in order, to the end."""

import asyncio
from typing import Any

import httpx
import pytest

from tests.conftest import Tenant
from tests.e2e.runs import sse_events

pytestmark = pytest.mark.executors
FOLLOWERS = 200


async def _follow_right_after_creating(http: httpx.AsyncClient, tenant: Tenant, agent_id: str) -> list[dict[str, Any]]:
    thread = await http.post("/v1/threads", json={"agent_id": agent_id}, headers=tenant.admin)
    created = await http.post(f"/v1/threads/{thread.json()['id']}/runs", json={"input": "hi"}, headers=tenant.admin)
    assert created.status_code == 201, created.text
    stream = await http.get(f"/v1/runs/{created.json()['id']}/events", headers=tenant.admin)
    return sse_events(stream.text)


async def test_followers_that_subscribe_right_after_creating_runs_all_get_the_terminal_event(
    live_url: str, tenant: Tenant
) -> None:
    async with httpx.AsyncClient(base_url=live_url, timeout=120) as http:
        agent = await http.post("/v1/agents", json={"name": "Quick"}, headers=tenant.admin)  # the offline model
        followed = await asyncio.gather(
            *(_follow_right_after_creating(http, tenant, agent.json()["id"]) for _ in range(FOLLOWERS))
        )
    assert [events[-1]["type"] for events in followed] == ["run.completed"] * FOLLOWERS
    for events in followed:
        seqs = [e["seq"] for e in events]
        assert seqs == list(range(1, len(seqs) + 1))  # every event once, in order, from the first
