"""Runs: Threadline (API + persistence + tracing export) against a bare loop, and 1,000 runs at once.

    .venv/bin/python -m bench.runs [--backend sqlite|postgresql] [--runs 200] [--concurrency 16]
                                   [--burst 1000] [--burst-latency-ms 1000]

Both sides use the same fake OpenAI-compatible model (a process on loopback) and the same MCP server
(server-everything over Streamable HTTP), with the same run shape: the model calls `echo` once, then
answers, so each run is two model calls and one MCP tool call.

- Threadline: `threadline serve` on a fresh database, tracing exported to a local OTLP receiver; each
  run is POST /v1/threads/{id}/runs, then its event stream until `run.completed`.
- Bare loop: the `openai` SDK and one `mcp` client session in this process, no persistence.

The burst part starts `--burst` runs at once with a model that takes `--burst-latency-ms` per call
and reports the wall time against the ideal (two model calls), the errors and the server's peak memory.
"""

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager

import httpx
from mcp import Client
from openai import AsyncOpenAI

from bench._server import RunningServer, database, server
from tests.fakes.otlp_receiver import OtlpReceiver
from tests.mcp_servers import everything

TOOL = "everything__echo"


@asynccontextmanager
async def threadline(backend: str, env: dict[str, str]) -> AsyncIterator[RunningServer]:
    """A fresh database and a server on it, set up and torn down off the event loop (they block)."""
    stack = ExitStack()
    try:
        url = await asyncio.to_thread(stack.enter_context, database(backend))
        yield await asyncio.to_thread(stack.enter_context, server(url, env))
    finally:
        await asyncio.to_thread(stack.close)


@asynccontextmanager
async def fake_model(latency_ms: float) -> AsyncIterator[str]:
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is measured
        [
            sys.executable,
            "-m",
            "tests.fakes.openai_server",
            "--port",
            "0",
            "--latency-ms",
            str(latency_ms),
            "--script",
            "tool-then-text",
            "--tool-name",
            TOOL,
            "--tool-args",
            '{"message": "hi"}',
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("listening on "):
        raise RuntimeError(f"the fake model did not start: {line!r}")
    try:
        yield line.removeprefix("listening on ").strip()
    finally:
        process.terminate()
        process.wait(timeout=30)


async def setup(running: RunningServer, mcp_url: str, threads: int) -> tuple[httpx.AsyncClient, list[str]]:
    client = httpx.AsyncClient(
        base_url=running.base_url,
        headers=running.headers,
        timeout=600,
        limits=httpx.Limits(max_connections=2_000, max_keepalive_connections=2_000),
    )
    integration = (await client.post("/v1/mcp-integrations", json={"name": "Everything", "url": mcp_url})).json()
    agent = (
        await client.post(
            "/v1/agents", json={"name": "Bench", "model": "bench-model", "mcp_integration_ids": [integration["id"]]}
        )
    ).json()
    ids: list[str] = []
    for start in range(0, threads, 50):
        batch = await asyncio.gather(
            *(client.post("/v1/threads", json={"agent_id": agent["id"]}) for _ in range(min(50, threads - start)))
        )
        ids += [t.json()["id"] for t in batch]
    return client, ids


async def one_run(client: httpx.AsyncClient, thread_id: str) -> tuple[float, str]:
    began = time.perf_counter()
    run = (await client.post(f"/v1/threads/{thread_id}/runs", json={"input": "please echo"})).json()
    status = "failed"
    async with client.stream("GET", f"/v1/runs/{run['id']}/events") as events:
        async for line in events.aiter_lines():
            if line.startswith("event: run."):
                status = line.removeprefix("event: run.")
    return time.perf_counter() - began, status


async def drive(runs: int, concurrency: int, run_once) -> tuple[float, list[float], int]:  # type: ignore[no-untyped-def]
    remaining = list(range(runs))
    durations: list[float] = []
    errors = 0

    async def worker() -> None:
        nonlocal errors
        while remaining:
            index = remaining.pop()
            duration, ok = await run_once(index)
            durations.append(duration)
            errors += 0 if ok else 1

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - began, durations, errors


async def threadline_side(
    backend: str, model_url: str, mcp_url: str, runs: int, concurrency: int
) -> tuple[float, float, int]:
    async with OtlpReceiver() as receiver:
        env = {
            "THREADLINE_OPENAI_API_KEY": "sk-bench",
            "THREADLINE_OPENAI_BASE_URL": model_url,
            "THREADLINE_LANGFUSE_PUBLIC_KEY": "pk-lf-bench",
            "THREADLINE_LANGFUSE_SECRET_KEY": "sk-lf-bench",
            "THREADLINE_LANGFUSE_BASE_URL": receiver.base_url,
            "THREADLINE_MCP_ALLOWED_NETWORKS": "127.0.0.0/8",
            "THREADLINE_SECRET_KEY": "bench",
        }
        async with threadline(backend, env) as running:
            warm_up = min(runs, 20)
            client, threads = await setup(running, mcp_url, runs + warm_up)

            async def run_once(index: int) -> tuple[float, bool]:
                duration, status = await one_run(client, threads[index])
                return duration, status == "completed"

            try:
                await drive(warm_up, concurrency, lambda i: run_once(runs + i))  # sessions, caches, connections
                wall, durations, errors = await drive(runs, concurrency, run_once)
            finally:
                await client.aclose()
        return runs / wall, statistics.median(durations) / 2, errors


async def bare_side(model_url: str, mcp_url: str, runs: int, concurrency: int) -> tuple[float, float, int]:
    model = AsyncOpenAI(api_key="sk-bench", base_url=model_url)
    async with Client(mcp_url, cache=None) as mcp:
        listed = await mcp.list_tools()
        tools = [
            {
                "type": "function",
                "function": {
                    "name": f"everything__{t.name}",
                    "description": t.description or "",
                    "parameters": t.input_schema,
                },
            }
            for t in listed.tools
        ]

        async def run_once(_index: int) -> tuple[float, bool]:
            began = time.perf_counter()
            messages: list[dict] = [{"role": "user", "content": "please echo"}]
            first = await model.chat.completions.create(model="bench-model", messages=messages, tools=tools)  # type: ignore[arg-type]
            call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
            name = call.function.name.removeprefix("everything__")
            result = await mcp.call_tool(name, json.loads(call.function.arguments))
            messages.append(first.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result.content[0].text})  # type: ignore[union-attr]
            final = await model.chat.completions.create(model="bench-model", messages=messages, tools=tools)  # type: ignore[arg-type]
            return time.perf_counter() - began, bool(final.choices[0].message.content)

        await drive(min(runs, 20), concurrency, run_once)
        wall, durations, errors = await drive(runs, concurrency, run_once)
    await model.close()
    return runs / wall, statistics.median(durations) / 2, errors


async def burst(backend: str, model_url: str, mcp_url: str, count: int, latency_ms: float) -> None:
    env = {
        "THREADLINE_OPENAI_API_KEY": "sk-bench",
        "THREADLINE_OPENAI_BASE_URL": model_url,
        "THREADLINE_MCP_ALLOWED_NETWORKS": "127.0.0.0/8",
        "THREADLINE_SECRET_KEY": "bench",
        "THREADLINE_MAX_CONCURRENT_RUNS": str(count),
        "THREADLINE_DATABASE_POOL_SIZE": "40",
    }
    async with threadline(backend, env) as running:
        client, threads = await setup(running, mcp_url, count)
        try:
            began = time.perf_counter()
            results = await asyncio.gather(*(one_run(client, t) for t in threads), return_exceptions=True)
            wall = time.perf_counter() - began
        finally:
            await client.aclose()
        if True:
            outcomes = Counter(type(r).__name__ if isinstance(r, BaseException) else r[1] for r in results)
            errors = sum(n for outcome, n in outcomes.items() if outcome != "completed")
            ideal = 2 * latency_ms / 1000
            print(
                f"{backend}: {count} concurrent runs, model latency {latency_ms:.0f} ms/call: wall {wall:.2f} s "
                f"(ideal {ideal:.1f} s, {wall / ideal:.2f}x), errors {errors}, "
                f"server peak memory {running.peak_memory_mb():.0f} MB; outcomes {dict(outcomes)}",
                flush=True,
            )


async def main(args: argparse.Namespace) -> None:
    everything.entry_file()
    async with everything.EverythingHttpServer() as mcp:
        async with fake_model(0) as model_url:
            ours = await threadline_side(args.backend, model_url, mcp.url, args.runs, args.concurrency)
            bare = await bare_side(model_url, mcp.url, args.runs, args.concurrency)
        print(
            f"{args.backend}: {args.runs} runs, {args.concurrency} at a time, zero-latency model:\n"
            f"  Threadline: {ours[0]:7.1f} runs/s, median per-step latency {ours[1] * 1000:6.1f} ms, errors {ours[2]}\n"
            f"  bare loop:  {bare[0]:7.1f} runs/s, median per-step latency {bare[1] * 1000:6.1f} ms, errors {bare[2]}\n"
            f"  ratio (bare / Threadline runs/s): {bare[0] / ours[0]:.2f}x",
            flush=True,
        )
        if args.burst:
            async with fake_model(args.burst_latency_ms) as model_url:
                await burst(args.backend, model_url, mcp.url, args.burst, args.burst_latency_ms)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--burst-latency-ms", type=float, default=1000)
    asyncio.run(main(parser.parse_args()))
