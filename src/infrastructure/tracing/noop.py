"""Tracing off: runs go on, nothing is recorded, nothing is sent."""

from collections.abc import Mapping
from typing import Any

from application.ports.tracing import Level, RunTrace, TraceGeneration, TraceSpan
from domain.usage import Usage


class NoopSpan:
    def end(
        self,
        *,
        output: Any = None,
        level: Level = Level.DEFAULT,
        status_message: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        return None


class NoopGeneration:
    def end(
        self,
        *,
        output: Any = None,
        usage: Usage | None = None,
        model: str | None = None,
        level: Level = Level.DEFAULT,
        status_message: str | None = None,
    ) -> None:
        return None


class NoopRunTrace:
    @property
    def trace_id(self) -> str | None:
        return None

    def span(self, name: str, *, input: Any = None, metadata: Mapping[str, Any] | None = None) -> TraceSpan:
        return NoopSpan()

    def generation(
        self,
        name: str,
        *,
        model: str,
        model_parameters: Mapping[str, Any],
        input: Any,
        metadata: Mapping[str, Any] | None = None,
    ) -> TraceGeneration:
        return NoopGeneration()

    def end(self, *, output: Any = None, level: Level = Level.DEFAULT, status_message: str | None = None) -> None:
        return None


class NoopTracer:
    """Used when no Langfuse keys are configured."""

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
        return NoopRunTrace()

    async def flush(self) -> None:
        return None

    def trace_url(self, trace_id: str) -> str | None:
        return None

    async def shutdown(self) -> None:
        return None
