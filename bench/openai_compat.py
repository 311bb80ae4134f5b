"""The OpenAI-compatible front door against Threadline's own run API: the same run, streamed both ways.

    .venv/bin/python -m bench.openai_compat [--backend sqlite|postgresql] [--runs 200] [--concurrency 16]

One `threadline serve` on a fresh database, tracing exported to a local OTLP receiver, the fake
OpenAI-compatible model (a process on loopback) and server-everything over Streamable HTTP. The run shape is
the one of bench.runs: the model calls the MCP tool `echo` once, then answers (two model calls, one MCP call).

- native: POST /v1/threads/{id}/runs with `stream: true` on a thread made beforehand, read until `run.completed`.
- chat: POST /v1/chat/completions with `stream: true` and `stream_options.include_usage`, read until
  `data: [DONE]` (the request makes its thread, appends the message, starts the run and streams it).

Both sides use one httpx client (no SDK parsing on either side); after a warm-up of each, they are measured
in alternating rounds so that neither gets the warmer server. Prints runs/s and the median run of each, and
the ratios chat / native.
"""

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx

from bench._server import MCP_TOOL, fake_model, one_server
from tests.fakes.otlp_receiver import OtlpReceiver
from tests.mcp_servers import everything

TOOL = MCP_TOOL
ROUNDS = 2
RUN_TIMEOUT_SECONDS = 120.0


async def native_run(client: httpx.AsyncClient, thread_id: str) -> bool:
    body = {"input": "please echo", "stream": True}
    status = ""
    async with client.stream("POST", f"/v1/threads/{thread_id}/runs", json=body) as events:
        if events.status_code != 201:
            return False
        async for line in events.aiter_lines():
            if line.startswith("event: run."):
                status = line.removeprefix("event: run.")
    return status == "completed"


async def chat_run(client: httpx.AsyncClient, model: str) -> bool:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "please echo"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    finished = done = False
    async with client.stream("POST", "/v1/chat/completions", json=body) as chunks:
        if chunks.status_code != 200:
            return False
        async for line in chunks.aiter_lines():
            finished = finished or '"finish_reason": "stop"' in line
            done = done or line == "data: [DONE]"
    return finished and done


@dataclass
class Side:
    name: str
    durations: list[float] = field(default_factory=list)
    wall: float = 0.0
    errors: int = 0

    @property
    def runs_per_second(self) -> float:
        return len(self.durations) / self.wall

    @property
    def p50(self) -> float:
        return statistics.median(self.durations)


async def drive(side: Side | None, runs: int, concurrency: int, run_once: Callable[[int], Awaitable[bool]]) -> None:
    remaining = list(range(runs))

    async def worker() -> None:
        while remaining:
            index = remaining.pop()
            began = time.perf_counter()
            try:
                async with asyncio.timeout(RUN_TIMEOUT_SECONDS):
                    ok = await run_once(index)
            except (TimeoutError, httpx.HTTPError):
                ok = False
            if side is not None:
                side.durations.append(time.perf_counter() - began)
                side.errors += 0 if ok else 1

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    if side is not None:
        side.wall += time.perf_counter() - began


async def main(args: argparse.Namespace) -> None:
    everything.entry_file()
    async with everything.EverythingHttpServer() as mcp, fake_model() as model_url, OtlpReceiver() as receiver:
        env = {
            "THREADLINE_DATABASE_POOL_SIZE": "16",
            "THREADLINE_OPENAI_API_KEY": "sk-bench",
            "THREADLINE_OPENAI_BASE_URL": model_url,
            "THREADLINE_LANGFUSE_PUBLIC_KEY": "pk-lf-bench",
            "THREADLINE_LANGFUSE_SECRET_KEY": "sk-lf-bench",
            "THREADLINE_LANGFUSE_BASE_URL": receiver.base_url,
            "THREADLINE_MCP_ALLOWED_NETWORKS": "127.0.0.0/8",
            "THREADLINE_SECRET_KEY": "bench",
        }
        async with one_server(args.backend, env) as running:
            limits = httpx.Limits(max_connections=1_000, max_keepalive_connections=1_000)
            async with httpx.AsyncClient(
                base_url=running.base_url, headers=running.headers, timeout=600, limits=limits
            ) as client:
                integration = await client.post("/v1/mcp-integrations", json={"name": "Everything", "url": mcp.url})
                agent = await client.post(
                    "/v1/agents",
                    json={
                        "name": "Bench",
                        "slug": "bench",
                        "model": "bench-model",
                        "mcp_integration_ids": [integration.json()["id"]],
                    },
                )
                agent_id = agent.json()["id"]
                warm_up = min(args.runs, 20)
                per_round = max(1, args.runs // ROUNDS)
                threads: list[str] = []
                for _ in range(warm_up + per_round * ROUNDS):
                    created = await client.post("/v1/threads", json={"agent_id": agent_id})
                    threads.append(created.json()["id"])
                native, chat = Side("native"), Side("chat")
                await drive(None, warm_up, args.concurrency, lambda i: native_run(client, threads.pop()))
                await drive(None, warm_up, args.concurrency, lambda i: chat_run(client, "bench"))
                print(f"{args.backend}: warmed up, measuring {per_round * ROUNDS} runs a side", file=sys.stderr)
                for _ in range(ROUNDS):
                    await drive(native, per_round, args.concurrency, lambda i: native_run(client, threads.pop()))
                    await drive(chat, per_round, args.concurrency, lambda i: chat_run(client, "bench"))
    print(
        f"{args.backend}: {len(native.durations)} runs a side, {args.concurrency} at a time, zero-latency model, "
        "both streamed (one MCP tool call, two model calls per run):\n"
        f"  POST /v1/threads/{{id}}/runs: {native.runs_per_second:7.1f} runs/s, "
        f"median run {native.p50 * 1000:6.1f} ms, errors {native.errors}\n"
        f"  POST /v1/chat/completions:   {chat.runs_per_second:7.1f} runs/s, "
        f"median run {chat.p50 * 1000:6.1f} ms, errors {chat.errors}\n"
        f"  ratio chat / native: runs/s {chat.runs_per_second / native.runs_per_second:.2f}x, "
        f"median run {chat.p50 / native.p50:.2f}x",
        flush=True,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    asyncio.run(main(parser.parse_args()))
