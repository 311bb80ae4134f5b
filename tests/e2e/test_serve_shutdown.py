"""`threadline serve` asked to stop while clients follow runs: the streams end at once, the process exits."""

import asyncio
import os
import signal
import time
from pathlib import Path

import httpx

from tests.databases import fresh_database, off_the_loop
from tests.fakes.openai_server import FakeOpenAI
from tests.servers import THREADLINE, free_port, organization_headers, threadline, threadline_serve


async def test_sigterm_ends_open_event_streams_and_the_server_exits_within_its_grace(tmp_path: Path) -> None:
    async with off_the_loop(fresh_database(tmp_path)) as url:
        await _stop_while_following(tmp_path, url)


async def _stop_while_following(tmp_path: Path, url: str) -> None:
    async with FakeOpenAI() as model:
        held = model.hold(first_text="a long thought")
        env = os.environ | {
            "THREADLINE_DATABASE_URL": url,
            "THREADLINE_LOG_FORMAT": "text",
            "THREADLINE_OPENAI_API_KEY": "sk-test",
            "THREADLINE_OPENAI_BASE_URL": model.base_url,
            "THREADLINE_DATA_DIR": str(tmp_path / "data"),
            "THREADLINE_SHUTDOWN_GRACE_SECONDS": "5",
            "THREADLINE_MAX_CONCURRENT_RUNS": "1",  # a second run waits for the first one's slot
        }
        await threadline(env, "migrate")
        headers = await organization_headers(env, "Stopping")
        port = free_port()
        server = await asyncio.create_subprocess_exec(
            THREADLINE, "serve", "--no-migrate", "--port", str(port), env=env, stderr=asyncio.subprocess.PIPE
        )
        assert server.stderr is not None
        while b"Uvicorn running on" not in await server.stderr.readline():
            pass
        log: list[bytes] = []

        async def read_log(until: bytes | None = None) -> None:
            assert server.stderr is not None
            while line := await server.stderr.readline():
                log.append(line)
                if until is not None and until in line:
                    return

        # The log must never fill its pipe; read up to where the server's resources close.
        closing = asyncio.create_task(read_log(until=b"Waiting for application shutdown"))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as http:
            agent = await http.post("/v1/agents", json={"name": "Slow", "model": "gpt-test"})
            thread = await http.post("/v1/threads", json={"agent_id": agent.json()["id"]})
            run = await http.post(f"/v1/threads/{thread.json()['id']}/runs", json={"input": "think"})
            other = await http.post("/v1/threads", json={"agent_id": agent.json()["id"]})
            waiting = await http.post(f"/v1/threads/{other.json()['id']}/runs", json={"input": "next"})
            assert waiting.json()["status"] == "queued"
            async with http.stream("GET", f"/v1/runs/{run.json()['id']}/events") as stream:
                lines = stream.aiter_lines()
                while "message.delta" not in await anext(lines):  # the run is live, the model holds
                    pass
                stopped_at = time.monotonic()
                server.send_signal(signal.SIGTERM)
                rest = [line async for line in lines]  # returns when the server ends the stream
                ended_after = time.monotonic() - stopped_at
        await asyncio.wait_for(closing, 10)
        held.release()  # in the grace period: the first run ends, and the one waiting for its slot starts
        drain = asyncio.create_task(read_log())
        # uvicorn ends by raising the signal it caught again, once it has shut down cleanly
        assert await asyncio.wait_for(server.wait(), 10) == -signal.SIGTERM
        exited_after = time.monotonic() - stopped_at
        await drain
        text = b"".join(log).decode()
    assert ended_after < 2, f"the stream ended {ended_after:.1f} s after SIGTERM"
    assert exited_after < 5 + 2, f"the server exited {exited_after:.1f} s after SIGTERM"
    assert not any("run.completed" in line for line in rest)
    assert "Application shutdown complete" in text and "Traceback" not in text
    assert "run execution crashed" not in text


async def test_an_idle_connection_is_kept_open_as_long_as_configured(tmp_path: Path) -> None:
    """Behind a load balancer, the server must not close a connection the balancer still counts on: the idle
    time it keeps one open is THREADLINE_KEEP_ALIVE_SECONDS (here shorter than the default, to be seen)."""
    env = os.environ | {
        "THREADLINE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'keep.db'}",
        "THREADLINE_DATA_DIR": str(tmp_path / "data"),
        "THREADLINE_KEEP_ALIVE_SECONDS": "1",
    }
    await threadline(env, "migrate")
    async with threadline_serve(env) as (base_url, _server):
        port = int(base_url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        await writer.drain()
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        # The response, then nothing until the server closes the idle connection: after 1 s, not the default 75 s.
        async with asyncio.timeout(4):
            while await reader.read(4096):
                pass
        writer.close()
