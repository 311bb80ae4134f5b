"""Log lines of a run's task carry the run's id, in the JSON format of every process."""

import asyncio
import io
import json
import logging

from infrastructure.logging import configure_logging, current_run


async def test_every_log_line_of_a_runs_task_names_the_run() -> None:
    root = logging.getLogger()
    before = (list(root.handlers), root.level)  # the suite's own log capture, put back afterwards
    configure_logging("INFO", "json")
    handler = root.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    lines = io.StringIO()
    handler.setStream(lines)

    async def a_run(run_id: str) -> None:
        current_run.set(run_id)
        logging.getLogger("somewhere.deep").info("calling the model")

    try:
        await asyncio.gather(asyncio.create_task(a_run("run-1")), asyncio.create_task(a_run("run-2")))
        logging.getLogger("elsewhere").info("not in a run")
    finally:
        root.handlers[:], level = before
        root.setLevel(level)
    logged = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert sorted(entry.get("run_id", "-") for entry in logged) == ["-", "run-1", "run-2"]


def test_the_http_clients_request_lines_are_written_at_debug_only() -> None:
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    written: dict[str, list[str]] = {}
    try:
        for setting in ("INFO", "DEBUG"):
            configure_logging(setting, "text")
            handler = root.handlers[0]
            assert isinstance(handler, logging.StreamHandler)
            lines = io.StringIO()
            handler.setStream(lines)
            logging.getLogger("httpx2").info('HTTP Request: POST http://127.0.0.1/v1/chat/completions "200 OK"')
            logging.getLogger("httpx2").warning("a connection was dropped")
            written[setting] = [line.split(": ", 1)[1] for line in lines.getvalue().splitlines()]
    finally:
        root.handlers[:], level = before
        root.setLevel(level)
        for client in ("httpx", "httpx2"):
            logging.getLogger(client).setLevel(logging.NOTSET)
    assert written["INFO"] == ["a connection was dropped"]
    assert written["DEBUG"] == [
        'HTTP Request: POST http://127.0.0.1/v1/chat/completions "200 OK"',
        "a connection was dropped",
    ]
