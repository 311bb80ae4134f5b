"""The request being served: its id is set at the HTTP edge (and by a worker for the run it executes), and what
the request creates or logs carries it."""

from contextvars import ContextVar

current_request_id: ContextVar[str | None] = ContextVar("threadline_request_id", default=None)
