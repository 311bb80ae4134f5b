"""Requests/second and latency of appending and listing thread messages, against a running server.

    .venv/bin/python -m bench.messages [--backends sqlite,postgresql] [--concurrency 16] [--requests 2000]

Starts `threadline serve` (one process, as the README starts it) on a fresh database per backend,
creates an organization and a thread, then drives it with a concurrent httpx client.
"""

import argparse
import asyncio
import statistics
import time
from typing import Any

import httpx

from bench._server import database, server


async def _drive(
    client: httpx.AsyncClient, method: str, url: str, body: dict[str, Any] | None, total: int, concurrency: int
) -> tuple[float, list[float], int]:
    latencies: list[float] = []
    errors = 0
    remaining = total

    async def worker() -> None:
        nonlocal remaining, errors
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            response = await client.request(method, url, json=body)
            latencies.append(time.perf_counter() - start)
            if response.status_code >= 400:
                errors += 1

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - began, latencies, errors


def _row(name: str, elapsed: float, latencies: list[float], errors: int) -> str:
    q = statistics.quantiles(latencies, n=100)
    return (
        f"{name:44} {len(latencies) / elapsed:8.0f} req/s   p50 {q[49] * 1000:6.1f} ms"
        f"   p99 {q[98] * 1000:6.1f} ms   errors {errors}"
    )


async def _bench(base: str, headers: dict[str, str], concurrency: int, total: int, backend: str) -> list[str]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits, timeout=60) as client:
        thread = (await client.post("/v1/threads", json={"title": "bench"})).json()["id"]
        url = f"/v1/threads/{thread}/messages"
        await _drive(client, "POST", url, {"content": "warm up"}, 50, 4)
        rows = []
        elapsed, lat, err = await _drive(client, "POST", url, {"content": "hello there"}, total, concurrency)
        rows.append(_row(f"{backend}: POST /v1/threads/{{id}}/messages", elapsed, lat, err))
        elapsed, lat, err = await _drive(client, "GET", url + "?limit=20", None, total, concurrency)
        rows.append(_row(f"{backend}: GET  /v1/threads/{{id}}/messages", elapsed, lat, err))
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    print(f"concurrency {args.concurrency}, {args.requests} requests per endpoint, one server process")
    for backend in args.backends.split(","):
        with database(backend) as url, server(url) as running:
            for row in asyncio.run(_bench(running.base_url, running.headers, args.concurrency, args.requests, backend)):
                print(row, flush=True)


if __name__ == "__main__":
    main()
