"""Runs traced in Langfuse, on the langfuse SDK 5.x (OpenTelemetry spans exported over OTLP/HTTP).

What the SDK's source dictates here:
- The SDK keeps one client state per public key for the whole process and never forgets it, even after
  shutdown: a second client with the same key silently gets the first one's base_url and exporter. Each
  tracer therefore removes its entry when shut down, and tests give every tracer its own public key.
  That registry is private SDK state, reached only through `langfuse_registry.LangfuseRegistry`.
- Without a tracer provider the SDK installs its own as OpenTelemetry's global provider, and every later
  client adds its exporter to that one. Each tracer owns a TracerProvider instead and touches no global.
- 5.x has no trace object: session id, trace name and trace metadata are "propagated attributes" that the
  SDK reads from the OpenTelemetry context when an observation starts. They are put in a fresh context once
  per run, and every observation of the run starts in it with its parent named, so concurrent runs never
  share a context.
- `start_observation` takes no start time, and a run's observations reach the SDK after the fact (`_Later`):
  the tracer opens their OpenTelemetry spans itself, with their times, on the client's tracer, and wraps them
  in the SDK's observation classes, which set Langfuse's attributes as `start_observation` would.
- Export runs in the SDK's background thread; only `flush()`/`shutdown()` wait for the network.
- The SDK uploads base64 data URIs found in input/output to presigned URLs on another host (the media
  feature); it is switched off through LANGFUSE_MEDIA_UPLOAD_ENABLED, the SDK's only switch for it.
"""

import asyncio
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from time import time_ns
from typing import Any, Literal
from urllib.parse import quote

from langfuse import Langfuse, LangfuseGeneration, LangfuseOtelSpanAttributes, LangfuseSpan, propagate_attributes
from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from application.ports.tracing import Level, RunTrace, TraceGeneration, TraceSpan
from application.request_context import current_request_id
from domain.usage import Usage
from infrastructure.tracing.langfuse_registry import LangfuseRegistry
from infrastructure.tracing.noop import NoopRunTrace

logger = logging.getLogger(__name__)

_SPAN_IDS = RandomIdGenerator()
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


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

    def context(self) -> otel_context.Context:
        """A fresh context holding them: a span that happens to be current in the caller's task is never a
        parent. Made once per run; every observation of the run starts in it."""
        token = otel_context.attach(otel_context.Context())
        try:
            with propagate_attributes(session_id=self.session_id, trace_name=self.trace_name, metadata=self.metadata):
                return otel_context.get_current()
        finally:
            otel_context.detach(token)


class _ChosenTraceIds(RandomIdGenerator):
    """Random ids, except that a run's root span takes the trace id the run was given when it began (the root
    is opened later, off the run's path, but the run needs its trace id at once)."""

    def __init__(self) -> None:
        self._chosen = threading.local()

    def generate_trace_id(self) -> int:
        chosen: int | None = getattr(self._chosen, "trace_id", None)
        return chosen if chosen is not None else super().generate_trace_id()

    @contextmanager
    def choosing(self, trace_id: int) -> Iterator[None]:
        self._chosen.trace_id = trace_id
        try:
            yield
        finally:
            self._chosen.trace_id = None


LATER_SECONDS = 0.002
"""How long after the first of them the tracing work waiting is done."""


class _Later:
    """Tracing work done a little later, not on the run's path.

    Opening an observation in the SDK costs about 0.2 ms of CPU (attributes serialized, the span processor's
    bookkeeping), and a run opens four or more. Each operation is recorded with its time instead, and handed
    to the SDK LATER_SECONDS after the first one waiting: by then the run that ended an observation has sent
    its next request (a step's writes, the next model call, a tool call; 0.3-1.5 ms of CPU away) and waits for
    it, so the work fills a wait instead of lengthening the run. (Run at the loop's next turn, it came before
    the run's next step four times a run.) Spans get their real start and end times; `flush` does what waits
    at once."""

    def __init__(self) -> None:
        self._jobs: deque[Callable[[], None]] = deque()
        self._scheduled_on: asyncio.AbstractEventLoop | None = None

    def __call__(self, job: Callable[[], None]) -> None:
        self._jobs.append(job)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.run()
            return
        if self._scheduled_on is not loop:
            self._scheduled_on = loop
            loop.call_later(LATER_SECONDS, self.run)

    def run(self) -> None:
        self._scheduled_on = None
        while self._jobs:
            job = self._jobs.popleft()
            try:
                job()
            except Exception:
                logger.warning("tracing: could not record an observation", exc_info=True)


@dataclass(frozen=True)
class _Sdk:
    """The SDK's parts a run trace records through."""

    client: Langfuse
    tracer: SdkTracer
    later: _Later


class _Observation:
    """A span or generation as the run sees it: its start time now, handed to the SDK whole when it ends."""

    def __init__(self, trace: "_LangfuseRunTrace", name: str, fields: dict[str, Any]) -> None:
        self._trace, self._name, self._fields = trace, name, fields
        self._started = time_ns()
        self._ended = False

    def _end(self, kind: type[LangfuseSpan | LangfuseGeneration], fields: dict[str, Any]) -> None:
        if self._ended:
            return
        self._ended = True
        trace, ended = self._trace, time_ns()
        trace.later(partial(trace.emit, kind, self._name, self._started, ended, {**self._fields, **fields}))


class _LangfuseSpan(_Observation):
    def end(
        self,
        *,
        output: Any = None,
        level: Level = Level.DEFAULT,
        status_message: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        if metadata:
            # Given at the start and at the end, Langfuse shows both, the end's value winning on a shared key.
            metadata = {**(self._fields.get("metadata") or {}), **metadata}
        ending = {"output": output, "level": _level(level), "status_message": status_message}
        self._end(LangfuseSpan, {**ending, "metadata": metadata} if metadata else ending)


class _LangfuseGeneration(_Observation):
    def end(
        self,
        *,
        output: Any = None,
        usage: Usage | None = None,
        model: str | None = None,
        level: Level = Level.DEFAULT,
        status_message: str | None = None,
    ) -> None:
        usage_details = (
            {"input": usage.input_tokens, "output": usage.output_tokens, "total": usage.total_tokens}
            if usage is not None
            else None
        )
        ending = {"output": output, "usage_details": usage_details, "level": _level(level)}
        ending["status_message"] = status_message
        self._end(LangfuseGeneration, {**ending, "model": model} if model else ending)


class _LangfuseRunTrace:
    def __init__(
        self, sdk: _Sdk, trace_id: str, attributes: _TraceAttributes, *, resumed: bool, input: Any, metadata: Any
    ) -> None:
        self._sdk = sdk
        self._trace_id = trace_id
        self._ended = False
        self._root: LangfuseSpan | None = None
        self._children: otel_context.Context | None = None
        started = time_ns()
        sdk.later(lambda: self._open(attributes, started, resumed=resumed, input=input, metadata=metadata))

    @property
    def trace_id(self) -> str | None:
        return self._trace_id

    @property
    def later(self) -> "_Later":
        return self._sdk.later

    def _open(self, attributes: _TraceAttributes, started: int, *, resumed: bool, input: Any, metadata: Any) -> None:
        run_context = attributes.context()
        tracer, trace_id = self._sdk.tracer, int(self._trace_id, 16)
        ids = tracer.id_generator
        if not resumed and isinstance(ids, _ChosenTraceIds):
            with ids.choosing(trace_id):
                span = tracer.start_span(attributes.trace_name, context=run_context, start_time=started)
        else:
            # A run resumed after it waited for the client goes on in its trace, under a new root; so does
            # every run when the SDK shares another client's provider (not ours to choose trace ids in).
            parent = NonRecordingSpan(
                SpanContext(trace_id, _SPAN_IDS.generate_span_id(), is_remote=False, trace_flags=_SAMPLED)
            )
            span = tracer.start_span(
                attributes.trace_name,
                context=otel_trace.set_span_in_context(parent, run_context),
                start_time=started,
                attributes={LangfuseOtelSpanAttributes.AS_ROOT: True},
            )
        try:
            self._root = LangfuseSpan(otel_span=span, langfuse_client=self._sdk.client, input=input, metadata=metadata)
        except Exception:
            span.end()  # not left open in the span processor's books
            raise
        self._children = otel_trace.set_span_in_context(span, run_context)

    def emit(
        self,
        kind: type[LangfuseSpan | LangfuseGeneration],
        name: str,
        started: int,
        ended: int,
        fields: dict[str, Any],
    ) -> None:
        """Hand an observation that has ended to the SDK (run by `_Sdk.later`)."""
        if self._children is None:
            return  # the root could not be opened (logged)
        span = self._sdk.tracer.start_span(name, context=self._children, start_time=started)
        try:
            kind(otel_span=span, langfuse_client=self._sdk.client, **fields)  # sets Langfuse's attributes on it
        finally:
            span.end(end_time=ended)  # what the observation's `end` does

    def span(self, name: str, *, input: Any = None, metadata: Mapping[str, Any] | None = None) -> TraceSpan:
        return _LangfuseSpan(self, name, {"input": input, "metadata": _as_dict(metadata)})

    def generation(
        self,
        name: str,
        *,
        model: str,
        model_parameters: Mapping[str, Any],
        input: Any,
        metadata: Mapping[str, Any] | None = None,
    ) -> TraceGeneration:
        fields = {"model": model, "model_parameters": dict(model_parameters), "input": input}
        return _LangfuseGeneration(self, name, {**fields, "metadata": _as_dict(metadata)})

    def end(self, *, output: Any = None, level: Level = Level.DEFAULT, status_message: str | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        ended = time_ns()
        self._sdk.later(lambda: self._close(ended, output=output, level=_level(level), status_message=status_message))

    def _close(
        self, ended: int, *, output: Any, level: Literal["WARNING", "ERROR"] | None, status_message: str | None
    ) -> None:
        root = self._root
        if root is None:
            return
        root.update(output=output, level=level, status_message=status_message)
        root.end(end_time=ended)


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
        self._sdk: _Sdk | None = None
        self._later = _Later()
        try:
            # Media upload would send data URIs found in input/output to presigned URLs on another host.
            os.environ["LANGFUSE_MEDIA_UPLOAD_ENABLED"] = "false"
            resource = {"langfuse.environment": environment, "langfuse.release": release}
            self._provider = TracerProvider(
                resource=Resource.create({key: value for key, value in resource.items() if value}),
                id_generator=_ChosenTraceIds(),
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
            tracer = LangfuseRegistry.otel_tracer(self._client)
            if isinstance(tracer, SdkTracer):  # else the SDK switched tracing off (LANGFUSE_TRACING_ENABLED=false)
                self._sdk = _Sdk(client=self._client, tracer=tracer, later=self._later)
        except Exception:
            logger.error("tracing: could not start the Langfuse client; runs are not traced", exc_info=True)
            self._client = self._sdk = None

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
        sdk = self._sdk
        if sdk is None or self._closed:
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
            # The root keeps the caller's metadata whole: propagated values over 200 chars are dropped.
            return _LangfuseRunTrace(
                sdk,
                trace_id or format(_SPAN_IDS.generate_trace_id(), "032x"),
                attributes,
                resumed=trace_id is not None,
                input=input,
                metadata=_as_dict(metadata),
            )
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
        self._later.run()
        try:
            await asyncio.to_thread(client.flush)
        except Exception:
            logger.warning("tracing: flush failed", exc_info=True)

    async def shutdown(self) -> None:
        """Export what is buffered and stop the SDK's threads; later runs are not traced."""
        if self._closed:
            return
        self._closed = True
        self._later.run()
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
