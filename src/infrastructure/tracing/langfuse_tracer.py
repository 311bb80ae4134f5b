"""Runs traced in Langfuse, on the langfuse SDK 5.x (OpenTelemetry spans exported over OTLP/HTTP).

What the SDK's source dictates here:
- The SDK keeps one client state per public key for the whole process and never forgets it, even after
  shutdown: a second client with the same key silently gets the first one's base_url and exporter. Each
  tracer therefore removes its entry when shut down, and tests give every tracer its own public key.
  That registry is private SDK state, reached only through `langfuse_registry.LangfuseRegistry`.
- Without a tracer provider the SDK installs its own as OpenTelemetry's global provider, and every later
  client adds its exporter to that one. Each tracer owns a TracerProvider instead and touches no global.
- 5.x has no trace object: session id, trace name and trace metadata are "propagated attributes" that the
  SDK reads from the OpenTelemetry context when an observation starts. They are put in a fresh context for
  the few synchronous lines that open an observation, and every child names its parent explicitly, so
  concurrent runs never share a context.
- Export runs in the SDK's background thread; only `flush()`/`shutdown()` wait for the network.
- The SDK uploads base64 data URIs found in input/output to presigned URLs on another host (the media
  feature); it is switched off through LANGFUSE_MEDIA_UPLOAD_ENABLED, the SDK's only switch for it.
"""

import asyncio
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from langfuse import Langfuse, LangfuseGeneration, LangfuseSpan, propagate_attributes
from opentelemetry import context as otel_context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from application.ports.tracing import Level, RunTrace, TraceGeneration, TraceSpan
from application.request_context import current_request_id
from domain.usage import Usage
from infrastructure.tracing.langfuse_registry import LangfuseRegistry
from infrastructure.tracing.noop import NoopGeneration, NoopRunTrace, NoopSpan

logger = logging.getLogger(__name__)

_NO_TRACE = "0" * 32


def _level(level: Level) -> Literal["WARNING", "ERROR"] | None:
    # DEFAULT is what Langfuse assumes when the attribute is absent.
    if level == Level.ERROR:
        return "ERROR"
    if level == Level.WARNING:
        return "WARNING"
    return None


def _as_dict(values: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return dict(values) if values else None


@dataclass(frozen=True)
class _TraceAttributes:
    """What Langfuse shows on the trace and on every observation in it."""

    session_id: str
    trace_name: str
    metadata: dict[str, Any]

    @contextmanager
    def scope(self) -> Iterator[None]:
        # A fresh context: a span that happens to be current in the caller's task is never a parent.
        token = otel_context.attach(otel_context.Context())
        try:
            with propagate_attributes(session_id=self.session_id, trace_name=self.trace_name, metadata=self.metadata):
                yield
        finally:
            otel_context.detach(token)


class _LangfuseSpan:
    def __init__(self, span: LangfuseSpan) -> None:
        self._span = span
        self._ended = False

    def end(
        self,
        *,
        output: Any = None,
        level: Level = Level.DEFAULT,
        status_message: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            self._span.update(
                output=output, level=_level(level), status_message=status_message, metadata=_as_dict(metadata)
            )
            self._span.end()
        except Exception:
            logger.warning("tracing: could not end a span", exc_info=True)


class _LangfuseGeneration:
    def __init__(self, generation: LangfuseGeneration) -> None:
        self._generation = generation
        self._ended = False

    def end(
        self,
        *,
        output: Any = None,
        usage: Usage | None = None,
        model: str | None = None,
        level: Level = Level.DEFAULT,
        status_message: str | None = None,
    ) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            usage_details = (
                {"input": usage.input_tokens, "output": usage.output_tokens, "total": usage.total_tokens}
                if usage is not None
                else None
            )
            self._generation.update(
                output=output,
                usage_details=usage_details,
                model=model,
                level=_level(level),
                status_message=status_message,
            )
            self._generation.end()
        except Exception:
            logger.warning("tracing: could not end a generation", exc_info=True)


class _LangfuseRunTrace:
    def __init__(self, root: LangfuseSpan, attributes: _TraceAttributes) -> None:
        self._root = root
        self._attributes = attributes
        self._ended = False
        # A disabled SDK (e.g. LANGFUSE_TRACING_ENABLED=false) hands out spans with an all-zero trace id.
        self._trace_id = root.trace_id if root.trace_id and root.trace_id != _NO_TRACE else None

    @property
    def trace_id(self) -> str | None:
        return self._trace_id

    def span(self, name: str, *, input: Any = None, metadata: Mapping[str, Any] | None = None) -> TraceSpan:
        try:
            with self._attributes.scope():
                span = self._root.start_observation(name=name, as_type="span", input=input, metadata=_as_dict(metadata))
            return _LangfuseSpan(span)
        except Exception:
            logger.warning("tracing: could not open span %s", name, exc_info=True)
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
        try:
            with self._attributes.scope():
                generation = self._root.start_observation(
                    name=name,
                    as_type="generation",
                    model=model,
                    model_parameters=dict(model_parameters),
                    input=input,
                    metadata=_as_dict(metadata),
                )
            return _LangfuseGeneration(generation)
        except Exception:
            logger.warning("tracing: could not open generation %s", name, exc_info=True)
            return NoopGeneration()

    def end(self, *, output: Any = None, level: Level = Level.DEFAULT, status_message: str | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            self._root.update(output=output, level=_level(level), status_message=status_message)
            self._root.end()
        except Exception:
            logger.warning("tracing: could not end the run's trace", exc_info=True)


class LangfuseTracer:
    """One Langfuse trace per run; a tracing failure is logged and swallowed, never raised."""

    def __init__(
        self,
        *,
        public_key: str,
        secret_key: str,
        base_url: str,
        environment: str | None = None,
        release: str | None = None,
        timeout_seconds: int = 5,
        flush_interval_seconds: float = 5.0,
    ) -> None:
        self._public_key = public_key
        self._base_url = base_url.rstrip("/")
        self._closed = False
        self._provider: TracerProvider | None = None
        self._client: Langfuse | None = None
        try:
            # Media upload would send data URIs found in input/output to presigned URLs on another host.
            os.environ["LANGFUSE_MEDIA_UPLOAD_ENABLED"] = "false"
            resource = {"langfuse.environment": environment, "langfuse.release": release}
            self._provider = TracerProvider(
                resource=Resource.create({key: value for key, value in resource.items() if value})
            )
            self._client = Langfuse(
                public_key=public_key,
                secret_key=secret_key,
                base_url=base_url.rstrip("/"),
                environment=environment,
                release=release,
                timeout=timeout_seconds,
                flush_interval=flush_interval_seconds,
                tracer_provider=self._provider,
            )
            shared = LangfuseRegistry.tracer_provider(self._client)
            if shared is not None and shared is not self._provider:
                logger.warning(
                    "tracing: a Langfuse client with this public key already exists in this process; "
                    "its base URL and exporter are used"
                )
        except Exception:
            logger.error("tracing: could not start the Langfuse client; runs are not traced", exc_info=True)
            self._client = None

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
        if self._client is None or self._closed:
            return NoopRunTrace()
        try:
            # The request that created the run (in a worker, the one the run remembers: see job_queue.py).
            request_id = current_request_id.get()
            trace_metadata = {
                **(metadata or {}),
                "org_id": org_id,
                "agent_id": agent_id,
                "run_id": run_id,
                "request_id": request_id,
            }
            attributes = _TraceAttributes(
                session_id=thread_id,
                trace_name=name,
                metadata={key: value for key, value in trace_metadata.items() if value is not None},
            )
            with attributes.scope():
                # The root keeps the caller's metadata whole: propagated values over 200 chars are dropped.
                root = self._client.start_observation(
                    trace_context={"trace_id": trace_id} if trace_id else None,
                    name=name,
                    as_type="span",
                    input=input,
                    metadata=_as_dict(metadata),
                )
            return _LangfuseRunTrace(root, attributes)
        except Exception:
            logger.warning("tracing: could not start the trace of run %s", run_id, exc_info=True)
            return NoopRunTrace()

    def trace_url(self, trace_id: str) -> str | None:
        # Langfuse's web app answers /trace/<id> with a redirect to the trace in its project.
        if self._client is None:
            return None
        return f"{self._base_url}/trace/{quote(trace_id, safe='')}"

    async def flush(self) -> None:
        client = self._client
        if client is None or self._closed:
            return
        try:
            await asyncio.to_thread(client.flush)
        except Exception:
            logger.warning("tracing: flush failed", exc_info=True)

    async def shutdown(self) -> None:
        """Export what is buffered and stop the SDK's threads; later runs are not traced."""
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.to_thread(self._shutdown)
        except Exception:
            logger.warning("tracing: shutdown failed", exc_info=True)

    def _shutdown(self) -> None:
        client, provider = self._client, self._provider
        if client is not None:
            client.shutdown()
            # The SDK's per-key registry would hand this shut-down state to the next client with the same key.
            LangfuseRegistry.forget(client, self._public_key)
        if provider is not None:
            provider.shutdown()
