"""Runs stranded by a killed `threadline serve` (in-process executor): a new server on the same database
ends every one of them, however many there are (start-up recovery works through them all, a batch at a
time). Real server processes, the model a fake on loopback that holds its answers."""

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from dependency_injector import providers

from application.use_cases.organizations import CreateOrganizationCommand
from infrastructure.container import Container
from infrastructure.persistence import migrations
from infrastructure.resources import close_resources
from infrastructure.settings import Settings
from tests.databases import fresh_database, off_the_loop
from tests.fakes.openai_server import FakeOpenAI, HeldReply, Reply, echo_text
from tests.servers import threadline_serve

SECRET_KEY = "stranded runs test key"
RUNS = 600
EXECUTING = 50
"""THREADLINE_MAX_CONCURRENT_RUNS: this many runs are in progress at the model, the rest wait queued."""


class SlowModel:
    """Holds every answer while `holding`: the runs that reach it stay in progress. Then answers at once."""

    def __init__(self) -> None:
        self.holding = True
        self.held: list[HeldReply] = []
        self.all_executing = asyncio.Event()

    def __call__(self, body: dict[str, Any]) -> Reply:
        if not self.holding:
            return echo_text(body)
        held = HeldReply()
        self.held.append(held)
        if len(self.held) >= EXECUTING:
            self.all_executing.set()
        return held


async def _admin_key(url: str, tmp_path: Path) -> str:
    """Migrates the scratch database and creates an organization in it: an admin key of it."""
    await asyncio.to_thread(migrations.upgrade, url)
    container = Container()
    settings = Settings(_env_file=None, database_url=url, secret_key=SECRET_KEY, data_dir=tmp_path / "data")
    container.settings.override(providers.Object(settings))
    try:
        created = await (await container.create_organization.async_()).execute(
            CreateOrganizationCommand(name="Stranded", slug=None)
        )
    finally:
        await close_resources(container)
    return created.admin_key_plaintext


async def _run_ids(client: httpx.AsyncClient, status: str) -> dict[str, dict[str, Any]]:
    """Every run of the organization in that status, by id (all pages)."""
    found: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    while True:
        params = {"status": status, "limit": "100"} | ({"cursor": cursor} if cursor else {})
        page = await client.get("/v1/runs", params=params)
        assert page.status_code == 200, page.text
        found |= {run["id"]: run for run in page.json()["data"]}
        if (cursor := page.json()["next_cursor"]) is None:
            return found


async def _until(condition: Callable[[], Awaitable[bool]], seconds: float) -> None:
    """Checks `condition` again and again (each check asks the server) until it holds, for at most `seconds`."""
    async with asyncio.timeout(seconds):
        while not await condition():  # noqa: ASYNC110 - the condition is the server's, no event to wait on here
            await asyncio.sleep(0.2)


async def test_every_run_a_killed_server_left_queued_or_in_progress_ends_after_a_restart(tmp_path: Path) -> None:
    async with off_the_loop(fresh_database(tmp_path)) as url:
        await _kill_and_restart(tmp_path, url)


async def _kill_and_restart(tmp_path: Path, url: str) -> None:
    model = SlowModel()
    async with FakeOpenAI(responder=model, record_requests=False) as fake:
        env = os.environ | {
            "THREADLINE_DATABASE_URL": url,
            "THREADLINE_EXECUTOR": "in_process",
            "THREADLINE_MAX_CONCURRENT_RUNS": str(EXECUTING),
            "THREADLINE_ORG_MAX_CONCURRENT_RUNS": str(EXECUTING),  # one organization's runs, all of them at once
            "THREADLINE_DATABASE_POOL_SIZE": "8",  # beside the suite's own connections, within the server's limit
            "THREADLINE_LOG_FORMAT": "text",
            "THREADLINE_OPENAI_API_KEY": "sk-test",
            "THREADLINE_OPENAI_BASE_URL": fake.base_url,
            "THREADLINE_DATA_DIR": str(tmp_path / "data"),
            "THREADLINE_SECRET_KEY": SECRET_KEY,
        }
        headers = {"Authorization": f"Bearer {await _admin_key(url, tmp_path)}"}
        async with threadline_serve(env) as (base_url, first):
            async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as http:
                agent = await http.post("/v1/agents", json={"name": "Slow", "model": "gpt-test"})
                assert agent.status_code == 201, agent.text
                gate = asyncio.Semaphore(32)

                async def create(index: int) -> str:
                    async with gate:
                        thread = await http.post("/v1/threads", json={"agent_id": agent.json()["id"]})
                        assert thread.status_code == 201, thread.text
                        run = await http.post(f"/v1/threads/{thread.json()['id']}/runs", json={"input": f"q{index}"})
                        assert run.status_code == 201, run.text
                        return str(run.json()["id"])

                created = set(await asyncio.gather(*(create(i) for i in range(RUNS))))
                await asyncio.wait_for(model.all_executing.wait(), 30)
                executing = await _run_ids(http, "in_progress")
                queued = await _run_ids(http, "queued")
            assert len(executing) == EXECUTING and len(queued) == RUNS - EXECUTING  # more than a recovery batch
            first.kill()  # kill -9: nothing is cleaned up
            await first.wait()
        model.holding = False

        async with (
            threadline_serve(env) as (base_url, _second),
            httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as http,
        ):

            async def all_ended() -> bool:
                # queued first: a run never goes back to queued, so both empty in this order means all ended
                return not await _run_ids(http, "queued") and not await _run_ids(http, "in_progress")

            try:
                await _until(all_ended, 45)
            except TimeoutError:
                stuck = {status: len(await _run_ids(http, status)) for status in ("queued", "in_progress")}
                pytest.fail(f"runs that never ended after the restart: {stuck}")
            completed = await _run_ids(http, "completed")
            failed = await _run_ids(http, "failed")

    assert len(created) == RUNS
    assert set(completed) | set(failed) == created
    assert set(failed) == set(executing)  # the runs at the model when the server died, and only they
    assert {run["error"]["code"] for run in failed.values()} == {"interrupted"}
    assert set(completed) == set(queued)
    assert all(run["steps"] for run in completed.values())
