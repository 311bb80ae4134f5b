"""Latency of one agent run through Threadline's /mcp (`tools/call`) against the same run through the
REST API (POST a run, follow its events until it completes).

    .venv/bin/python -m bench.mcp_server [--backend sqlite|postgresql] [--calls 100]

`threadline serve` on a fresh database; the agent's model is a fake OpenAI-compatible server on
loopback that answers at once. Calls are made one after the other; the medians are compared.
"""

import argparse
import asyncio
import statistics
import time

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench._server import fake_model, one_server


async def main(backend: str, calls: int) -> None:
    async with fake_model(0) as model_url:
        env = {
            "THREADLINE_OPENAI_API_KEY": "sk-bench",
            "THREADLINE_OPENAI_BASE_URL": model_url,
            "THREADLINE_SECRET_KEY": "b",
        }
        async with (
            one_server(backend, env) as running,
            httpx.AsyncClient(base_url=running.base_url, headers=running.headers, timeout=60) as rest,
        ):
            await rest.post(
                "/v1/agents",
                json={"name": "Bench", "slug": "bench", "model": "bench-model", "publish_as_mcp": True},
            )
            agent = (await rest.get("/v1/agents")).json()["data"][0]

            async def via_rest(i: int) -> None:
                thread = (await rest.post("/v1/threads", json={"agent_id": agent["id"]})).json()
                run = (await rest.post(f"/v1/threads/{thread['id']}/runs", json={"input": f"hello {i}"})).json()
                async with rest.stream("GET", f"/v1/runs/{run['id']}/events") as events:
                    async for _ in events.aiter_lines():
                        pass

            http = httpx2.AsyncClient(headers=running.headers, timeout=60)
            async with (
                http,
                Client(streamable_http_client(f"{running.base_url}/mcp", http_client=http), cache=None) as mcp,
            ):

                async def via_mcp(i: int) -> None:
                    result = await mcp.call_tool("bench", {"input": f"hello {i}"})
                    assert not result.is_error, result

                samples: dict[str, list[float]] = {"mcp": [], "rest": []}
                for i in range(10):  # warm up both paths
                    await via_mcp(i)
                    await via_rest(i)
                for i in range(calls):  # alternate, so both see the same machine
                    for name, call in (("mcp", via_mcp), ("rest", via_rest)):
                        began = time.perf_counter()
                        await call(i)
                        samples[name].append(time.perf_counter() - began)
    mcp_median, rest_median = statistics.median(samples["mcp"]), statistics.median(samples["rest"])
    print(
        f"{backend}: {calls} agent runs each way, zero-latency model\n"
        f"  MCP tools/call: median {mcp_median * 1000:6.1f} ms\n"
        f"  REST run + events: median {rest_median * 1000:6.1f} ms\n"
        f"  ratio (MCP / REST): {mcp_median / rest_median:.2f}x",
        flush=True,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(main(args.backend, args.calls))
