"""How soon `/mcp` clients of both protocol generations hear that an organization's tools and prompts changed.

A `threadline serve` on a fresh database with a prompts directory; a handshake-era client (told on its GET stream)
and a 2026-07-28 client (a `subscriptions/listen` stream) stay connected while, round after round, a template file
is added, then removed, and an agent is published, then unpublished, each at a random moment. Each change's
latency is the time from the change (the file written, the API request sent) to the first `list_changed` each
client receives. The figures are
printed with their ratio to the bound the product promises: every client told within 2 s.

    .venv/bin/python -m bench.mcp_changes --backends sqlite,postgresql --rounds 10
"""

import argparse
import asyncio
import contextlib
import random
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import Subscription

from bench._server import RunningServer, database, server

BOUND_SECONDS = 2.0
TEMPLATE = """name: bench-digest
description: Summarise the day for a team
agent: bench-bot
arguments:
  - {name: team, required: true}
messages:
  - role: user
    content: "Digest for {team}."
"""


class Arrivals:
    """A handshake-era client's `message_handler`: wakes a waiter at each list_changed notification."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            method = message.root.method if hasattr(message, "root") else message.method
            if method in ("notifications/tools/list_changed", "notifications/prompts/list_changed"):
                self.arrived.set()


@contextlib.asynccontextmanager
async def _client(running: RunningServer, **options: Any) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers=running.headers, timeout=httpx2.Timeout(30, read=300))
    transport = streamable_http_client(f"{running.base_url}/mcp", http_client=http)
    async with http, Client(transport, cache=None, **options) as client:
        yield client


async def _quiet(legacy: Arrivals, events: "asyncio.Queue[float]", rng: random.Random) -> None:
    """Lets the notifications of the last change arrive (one change may be told more than once), then forgets
    them, so the next change is timed from nothing pending; then waits a random part of a second more, so changes
    fall anywhere in the server's polling of the prompts directory."""
    await asyncio.sleep(0.5)
    legacy.arrived.clear()
    while not events.empty():
        events.get_nowait()
    await asyncio.sleep(rng.uniform(0, 1))


async def _timed(
    change: Callable[[], Awaitable[None]], legacy: Arrivals, events: "asyncio.Queue[float]", rng: random.Random
) -> tuple[float, float]:
    """Seconds from the change (the file written, the API request sent) to the first notification of each client:
    (handshake-era, 2026-07-28)."""
    await _quiet(legacy, events, rng)
    changed = time.perf_counter()
    await change()

    async def legacy_told() -> float:
        await legacy.arrived.wait()
        return time.perf_counter()

    old, new = await asyncio.wait_for(asyncio.gather(legacy_told(), events.get()), timeout=30)
    return old - changed, new - changed


async def _measure(running: RunningServer, prompts: Path, rounds: int) -> dict[str, list[tuple[float, float]]]:
    legacy = Arrivals()
    events: asyncio.Queue[float] = asyncio.Queue()
    rng = random.Random(7)
    results: dict[str, list[tuple[float, float]]] = {
        change: [] for change in ("file added", "file removed", "published", "unpublished")
    }
    async with (
        httpx.AsyncClient(base_url=running.base_url, headers=running.headers, timeout=30) as api,
        _client(running, mode="legacy", message_handler=legacy),
        _client(running, mode="2026-07-28") as modern,
        modern.listen(tools_list_changed=True, prompts_list_changed=True) as changes,
    ):

        async def heard(subscription: Subscription) -> None:
            async for _event in subscription:
                events.put_nowait(time.perf_counter())

        listening = asyncio.create_task(heard(changes))
        made = await api.post("/v1/agents", json={"name": "Bench Bot", "slug": "bench-bot", "model": "gpt-test"})
        made.raise_for_status()
        agent = made.json()["id"]
        template = prompts / "bench-digest.yaml"

        async def add_file() -> None:
            template.write_text(TEMPLATE)

        async def remove_file() -> None:
            template.unlink()

        async def publish(on: bool) -> None:
            (await api.patch(f"/v1/agents/{agent}", json={"publish_as_mcp": on})).raise_for_status()

        try:
            for _ in range(rounds):
                results["file added"].append(await _timed(add_file, legacy, events, rng))
                results["file removed"].append(await _timed(remove_file, legacy, events, rng))
                results["published"].append(await _timed(lambda: publish(True), legacy, events, rng))
                results["unpublished"].append(await _timed(lambda: publish(False), legacy, events, rng))
        finally:
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listening
    return results


def _row(backend: str, change: str, generation: str, seconds: list[float]) -> str:
    p50, worst = statistics.median(seconds) * 1000, max(seconds) * 1000
    return (
        f"| {backend} | {change} | {generation} | {p50:.0f} ms | {worst:.0f} ms | "
        f"{worst / (BOUND_SECONDS * 1000):.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    rows = []
    for backend in args.backends.split(","):
        with (
            database(backend) as url,
            TemporaryDirectory() as prompts,
            # The files are the templates of the benchmark's organization (bench._server names it Bench).
            server(url, {"THREADLINE_PROMPTS_DIR": prompts, "THREADLINE_PROMPTS_ORG": "bench"}) as running,
        ):
            measured = asyncio.run(_measure(running, Path(prompts), args.rounds))
        for change, pairs in measured.items():
            rows.append(_row(backend, change, "2025-11-25", [old for old, _ in pairs]))
            rows.append(_row(backend, change, "2026-07-28", [new for _, new in pairs]))
    print(f"{args.rounds} rounds; the bound: every client told within {BOUND_SECONDS:g} s")
    print("| database | change | client | p50 | max | max / bound |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
