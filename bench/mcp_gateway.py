"""Latency of an MCP tool call through Threadline's gateway vs. the bare `mcp` SDK client.

    .venv/bin/python -m bench.mcp_gateway [--calls 500] [--rounds 3]

Against server-everything (installed by `python3 dev.py test`) over stdio and over Streamable HTTP:
- bare: `mcp.Client` on an already-open session, `call_tool("echo")`;
- pooled: `SdkMcpGateway.call_tool` on its pooled session (the first call, which connects, reported apart).
The two are measured in alternating rounds in one process; the ratio compares medians.
"""

import argparse
import asyncio
import statistics
import time
from datetime import UTC, datetime
from uuid import uuid4

from mcp import Client

from application.ports.mcp import McpTarget
from domain.ids import IntegrationId, OrgId
from domain.integrations import Transport
from infrastructure.mcp_client.gateway import SdkMcpGateway
from infrastructure.mcp_client.operator_servers import OperatorServerRegistry
from infrastructure.outbound.guard import NetworkPolicy
from tests.mcp_servers import everything


async def _timed(call, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    samples = []
    for i in range(n):
        start = time.perf_counter()
        await call(i)
        samples.append(time.perf_counter() - start)
    return samples


def _target(transport: Transport, url: str | None) -> McpTarget:
    return McpTarget(
        integration_id=IntegrationId(uuid4()),
        org_id=OrgId(uuid4()),
        transport=transport,
        version=datetime.now(UTC),
        url=url,
        server="everything" if transport is Transport.STDIO else None,
        timeout_seconds=30,
    )


async def _measure(name: str, server: object, transport: Transport, url: str | None, calls: int, rounds: int) -> None:
    gateway = SdkMcpGateway(
        servers=OperatorServerRegistry({"everything": everything.stdio_parameters()}),
        outbound=NetworkPolicy(["127.0.0.0/8"]),
    )
    target = _target(transport, url)
    bare_samples: list[float] = []
    pooled_samples: list[float] = []
    connect = time.perf_counter()
    await gateway.call_tool(target, "echo", {"message": "first"})
    first_pooled = time.perf_counter() - connect
    bare_connect = time.perf_counter()
    async with Client(server, cache=None) as client:  # type: ignore[arg-type]
        await client.call_tool("echo", {"message": "first"})
        first_bare = time.perf_counter() - bare_connect
        for _ in range(rounds):
            bare_samples += await _timed(lambda i: client.call_tool("echo", {"message": f"m{i}"}), calls)
            pooled_samples += await _timed(lambda i: gateway.call_tool(target, "echo", {"message": f"m{i}"}), calls)
    await gateway.close()
    bare, pooled = statistics.median(bare_samples), statistics.median(pooled_samples)
    print(
        f"{name:6} bare SDK median {bare * 1e3:6.3f} ms | gateway median {pooled * 1e3:6.3f} ms | "
        f"ratio {pooled / bare:4.2f}x | first call (connect): gateway {first_pooled * 1e3:6.1f} ms, "
        f"bare {first_bare * 1e3:6.1f} ms",
        flush=True,
    )


async def main(calls: int, rounds: int) -> None:
    everything.entry_file()
    await _measure("stdio", everything.stdio_parameters(), Transport.STDIO, None, calls, rounds)
    async with everything.EverythingHttpServer() as http:
        await _measure("http", http.url, Transport.STREAMABLE_HTTP, http.url, calls, rounds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.rounds))
