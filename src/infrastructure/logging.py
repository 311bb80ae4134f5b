"""Structured logs: one JSON object per line, with the `extra` fields a call site passes."""

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from application.request_context import current_request_id

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}


_HTTP_CLIENT_LOGGERS = ("httpx", "httpx2")

current_run: ContextVar[str | None] = ContextVar("threadline_current_run", default=None)
"""The run a task executes: its log lines carry its id (set by the executors)."""


class _RunOfTask(logging.Filter):
    """A log line names the run its task executes and the request it serves (or that created the run)."""

    def filter(self, record: logging.LogRecord) -> bool:
        run_id = current_run.get()
        if run_id is not None and not hasattr(record, "run_id"):
            record.run_id = run_id
        request_id = current_request_id.get()
        if request_id is not None and not hasattr(record, "request_id"):
            record.request_id = request_id
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_RunOfTask())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The HTTP clients' line per request (each model call, each MCP message) is a detail of debugging: the run's
    # trace has every call, and at INFO those lines outnumbered the rest.
    for client in _HTTP_CLIENT_LOGGERS:
        logging.getLogger(client).setLevel(logging.NOTSET if root.level <= logging.DEBUG else logging.WARNING)
