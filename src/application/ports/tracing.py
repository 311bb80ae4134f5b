"""The tracing port: one trace per run, a generation per model call, a span per tool call.

Implementations must never raise: a tracing failure is logged and swallowed, never fails a run.
"""

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Protocol

from domain.usage import Usage


class Level(StrEnum):
    DEFAULT = "DEFAULT"
    WARNING = "WARNING"
    ERROR = "ERROR"


class TraceSpan(Protocol):
    def end(
        self,
        *,
        output: Any = None,
        level: Level = Level.DEFAULT,
        status_message: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Close the span; with level ERROR and a status message when the operation failed."""
        ...


class TraceGeneration(Protocol):
    def end(
        self,
        *,
        output: Any = None,
        usage: Usage | None = None,
        model: str | None = None,
        level: Level = Level.DEFAULT,
        status_message: str | None = None,
    ) -> None: ...


class RunTrace(Protocol):
    @property
    def trace_id(self) -> str | None:
        """The id under which the tracing backend shows this run (None when tracing is off)."""
        ...

    def span(self, name: str, *, input: Any = None, metadata: Mapping[str, Any] | None = None) -> TraceSpan:
        """A child of the run's root, e.g. a tool call (`mcp_prompt_retrieval`, `mcp_tool_call`, ...)."""
        ...

    def generation(
        self,
        name: str,
        *,
        model: str,
        model_parameters: Mapping[str, Any],
        input: Any,
        metadata: Mapping[str, Any] | None = None,
    ) -> TraceGeneration:
        """A child of the run's root for one model call."""
        ...

    def end(self, *, output: Any = None, level: Level = Level.DEFAULT, status_message: str | None = None) -> None:
        """Close the run's root."""
        ...


class Tracer(Protocol):
    def start_run(
        self,
        *,
        name: str,
        run_id: str,
        thread_id: str,
        org_id: str,
        agent_id: str | None,
        input: Any = None,
        metadata: Mapping[str, Any] | None = None,
        trace_id: str | None = None,
    ) -> RunTrace:
        """Open the trace of one run: session id = thread id; metadata carries org, agent and run. With `trace_id`
        (a run resumed after it waited for the client), its spans go on in the run's trace."""
        ...

    async def flush(self) -> None:
        """Send what is buffered (called at shutdown and by tests)."""
        ...

    def trace_url(self, trace_id: str) -> str | None:
        """Where a person sees the trace in the tracing backend's web app (None when tracing is off)."""
        ...
