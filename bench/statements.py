"""SQL statements and transactions per run: the run shape of bench.runs, one run at a time, with every statement
the server sends counted (SQLAlchemy engine events in the server process).

    .venv/bin/python -m bench.statements [--backend sqlite|postgresql] [--runs 20]

Prints, per run, the statements (BEGIN, COMMIT and ROLLBACK included, whether SQLAlchemy or the driver issues
them; on PostgreSQL only those the driver sent: a unit of work whose one statement went alone sends neither, and
shows as `(alone)`), the transactions, the connections checked out of the pool, and the statements by kind; then
the last run's statements in the order they were sent, one transaction per line.

The server runs under `python -m bench.statements --serve ...` (THREADLINE_BENCH_SERVER_PREFIX), which counts
and writes the counts to THREADLINE_BENCH_COUNTS on SIGUSR1.
"""

import argparse
import asyncio
import json
import os
import re
import signal
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

_COUNTS_FILE = "THREADLINE_BENCH_COUNTS"
_ALONE = "(alone)"
"""Where a transaction ended that sent neither BEGIN nor COMMIT (its one statement, or nothing, went alone)."""


def _kind(statement: str) -> str:
    """SELECT runs, INSERT run_events, BEGIN, ...: the verb and the first table."""
    words = statement.split()
    verb = words[0].upper() if words else "?"
    match = re.search(r"\b(?:FROM|INTO|UPDATE)\s+\"?(\w+)", statement, re.IGNORECASE)
    if verb == "SELECT" and match is None:
        return "SELECT (no table)"
    return f"{verb} {match.group(1)}" if match else verb


def _transactions(kinds: list[str]) -> list[list[str]]:
    """The statements as sent, cut after each COMMIT and ROLLBACK."""
    transactions: list[list[str]] = [[]]
    for kind in kinds:
        transactions[-1].append(kind)
        if kind in ("COMMIT", "ROLLBACK", _ALONE):
            transactions.append([])
    return [transaction for transaction in transactions if transaction]


def serve_counting(argv: list[str]) -> None:
    """Run the threadline CLI with statements counted."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine
    from sqlalchemy.pool import Pool

    counts: Counter[str] = Counter()
    sequence: list[str] = []  # kinds in order, since the last dump

    @event.listens_for(Engine, "before_cursor_execute")
    def _statement(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith("BEGIN"):
            return  # counted as the transaction begins (on PostgreSQL, the driver sends it)
        counts["statements"] += 1
        counts[f"kind: {_kind(statement)}"] += 1
        sequence.append(_kind(statement))

    begun: dict[int, int] = {}  # connection -> where its BEGIN is in the sequence

    @event.listens_for(Engine, "begin")
    def _begin(conn: Any) -> None:
        counts["statements"] += 1
        counts["transactions"] += 1
        counts["kind: BEGIN"] += 1
        begun[id(conn)] = len(sequence)
        sequence.append("BEGIN")

    def _ended(conn: Any, kind: str) -> None:
        # asyncpg's adapter sends BEGIN with the transaction's first statement: none sent, no BEGIN, nor an end.
        at = begun.pop(id(conn), None)
        if getattr(conn.connection.dbapi_connection, "_transaction", True) is None:
            counts["statements"] -= 1
            counts["kind: BEGIN"] -= 1
            if at is not None and at < len(sequence) and sequence[at] == "BEGIN":
                sequence[at] = ""  # not sent (left out when dumped: other connections' places stay as noted)
            sequence.append(_ALONE)
            return
        counts["statements"] += 1
        counts[f"kind: {kind}"] += 1
        sequence.append(kind)

    @event.listens_for(Engine, "commit")
    def _commit(conn: Any) -> None:
        _ended(conn, "COMMIT")

    @event.listens_for(Engine, "rollback")
    def _rollback(conn: Any) -> None:
        _ended(conn, "ROLLBACK")

    @event.listens_for(Pool, "checkout")
    def _checkout(*_: Any) -> None:
        counts["connections"] += 1

    def _dump(*_: Any) -> None:
        target = Path(os.environ[_COUNTS_FILE])
        sent = [kind for kind in sequence if kind]
        target.with_suffix(".tmp").write_text(json.dumps({"counts": counts, "sequence": sent}))
        sequence.clear()
        begun.clear()
        target.with_suffix(".tmp").replace(target)  # whole, when it appears

    signal.signal(signal.SIGUSR1, _dump)
    from infrastructure.cli import main

    sys.argv = ["threadline", *argv[1:]]  # argv[0]: the threadline script
    main()


async def measure(backend: str, runs: int) -> None:
    from bench import _server
    from bench._server import fake_model
    from bench.runs import Executor, one_run, setup, threadline
    from tests.mcp_servers import everything

    counts_file = Path(tempfile.mkdtemp()) / "counts.json"
    os.environ[_COUNTS_FILE] = str(counts_file)
    _server._PREFIX[:] = [sys.executable, "-m", "bench.statements", "--serve"]
    everything.entry_file()
    last_sequence: list[str] = []  # the statements' kinds as sent since the previous snapshot
    async with everything.EverythingHttpServer() as mcp, fake_model(0) as model_url:
        env = {
            "THREADLINE_OPENAI_API_KEY": "sk-bench",
            "THREADLINE_OPENAI_BASE_URL": model_url,
            "THREADLINE_MCP_ALLOWED_NETWORKS": "127.0.0.1/32",
            "THREADLINE_SECRET_KEY": "bench",
            "THREADLINE_DATABASE_POOL_SIZE": "4",
        }
        async with threadline(backend, Executor("in_process"), env) as running:
            clients, threads = await setup(running, mcp.url, runs + 6)

            async def snapshot() -> Counter[str]:
                counts_file.unlink(missing_ok=True)
                os.kill(running.processes[0].pid, signal.SIGUSR1)
                while not counts_file.exists():  # noqa: ASYNC110 - another process writes it
                    await asyncio.sleep(0.01)
                dumped = json.loads(counts_file.read_text())
                last_sequence[:] = dumped["sequence"]
                return Counter(dumped["counts"])

            for thread in threads[runs : runs + 5]:  # warm up: sessions, caches, connections
                assert (await one_run(clients[0], thread))[1] == "completed"
            idle_before = await snapshot()
            await asyncio.sleep(0.5)
            idle = await snapshot() - idle_before
            before = await snapshot()
            for thread in threads[:runs]:
                _, status = await one_run(clients[0], thread)
                assert status == "completed", status
            after = await snapshot()
            _, status = await one_run(clients[0], threads[-1])
            assert status == "completed", status
            await snapshot()
            await clients[0].aclose()
    spent = after - before
    print(f"{backend}: {runs} runs one at a time (POST with stream: true, read to run.completed)")
    if idle:
        print(f"  (an idle half second: {dict(idle)})")
    for name in ("statements", "transactions", "connections"):
        print(f"  {name} per run: {spent[name] / runs:.1f}")
    print("  by kind, per run:")
    for key, count in sorted(spent.items(), key=lambda item: -item[1]):
        if key.startswith("kind: "):
            print(f"    {count / runs:5.1f}  {key.removeprefix('kind: ')}")
    print("  one run, in order:")
    for transaction in _transactions(last_sequence):
        print(f"    {' | '.join(transaction)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve_counting(sys.argv[2:])
    else:
        parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="postgresql")
        parser.add_argument("--runs", type=int, default=20)
        arguments = parser.parse_args()
        asyncio.run(measure(arguments.backend, arguments.runs))
