"""Fair share: an organization's runs beyond its limit wait queued while another organization's run starts at
once; in process, and in worker mode (the limit is counted in the database, for the whole deployment)."""

import asyncio
from collections import Counter
from typing import Any
from uuid import UUID

import httpx
import pytest

from application.use_cases.organizations import SetOrganizationLimitsCommand
from infrastructure.container import Container
from tests.conftest import MakeTenant, Tenant
from tests.e2e.runs import agent_and_thread, settle, start
from tests.fakes.openai_server import FakeOpenAI, Reply, TextReply

pytestmark = pytest.mark.executors


class SlowModel:
    """Answers each run's input once the test lets it go, and counts the calls of each organization in flight
    (their first letter: `A…` or `B…`)."""

    def __init__(self) -> None:
        self.in_flight: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.gate = asyncio.Event()
        self.arrived: dict[str, asyncio.Event] = {}

    def arrival(self, text: str) -> asyncio.Event:
        return self.arrived.setdefault(text, asyncio.Event())

    async def __call__(self, body: dict[str, Any]) -> Reply:
        text = str([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
        org = text[0]
        self.in_flight[org] += 1
        self.most[org] = max(self.most[org], self.in_flight[org])
        self.arrival(text).set()
        try:
            if org == "A":
                await self.gate.wait()
            return TextReply(f"done: {text}")
        finally:
            self.in_flight[org] -= 1


async def statuses(client: httpx.AsyncClient, tenant: Tenant, run_ids: list[str]) -> Counter[str]:
    runs = [(await client.get(f"/v1/runs/{run_id}", headers=tenant.admin)).json() for run_id in run_ids]
    return Counter(run["status"] for run in runs)


async def test_an_organization_over_its_limit_waits_while_another_starts_at_once(
    client: httpx.AsyncClient, container: Container, make_tenant: MakeTenant, openai: FakeOpenAI
) -> None:
    a, b = await make_tenant("Busy"), await make_tenant("Other")
    await container.set_organization_limits().execute(
        SetOrganizationLimitsCommand(slug=a.slug, max_concurrent_runs=2, runs_per_minute=None)
    )
    model = SlowModel()
    openai.responder = model
    try:
        runs = []
        for index in range(5):
            _agent, thread = await agent_and_thread(client, a)
            runs.append((await start(client, a, thread, input=f"A{index}"))["id"])
        # The first two reach the model; the other three wait queued.
        await asyncio.wait_for(asyncio.gather(model.arrival("A0").wait(), model.arrival("A1").wait()), 30)
        assert (await statuses(client, a, runs)) == {"in_progress": 2, "queued": 3}

        _agent, thread = await agent_and_thread(client, b)
        other = await start(client, b, thread, input="B0")
        await asyncio.wait_for(model.arrival("B0").wait(), 30)  # at once, though A's runs wait
        assert (await settle(client, b, other["id"]))["status"] == "completed"
        assert (await statuses(client, a, runs))["queued"] == 3

        model.gate.set()
        ended = [await settle(client, a, run_id) for run_id in runs]
        assert [run["status"] for run in ended] == ["completed"] * 5
        assert model.most["A"] == 2  # never more than two of A's runs at once
    finally:
        openai.responder = None


async def test_an_organization_without_limits_of_its_own_has_the_deployments(
    container: Container, tenant: Tenant
) -> None:
    org = await container.find_organization().execute(tenant.slug)
    limits = await container.org_limits().of(org.id)
    assert limits.max_concurrent_runs == container.settings().org_max_concurrent_runs == 32
    assert limits.runs_per_minute is None
    assert isinstance(org.id, UUID)
