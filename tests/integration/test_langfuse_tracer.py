"""The Langfuse tracer on the real SDK, exporting over HTTP to a local OTLP receiver: what Langfuse gets."""

import asyncio
import base64
import logging
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider

from application.ports.tracing import Level, RunTrace
from domain.usage import Usage
from infrastructure.tracing import LangfuseTracer, NoopTracer
from tests.fakes.otlp_receiver import TRACES_PATH, OtlpReceiver, ReceivedSpan

SECRET = "sk-lf-test-secret"

MakeTracer = Callable[..., LangfuseTracer]


@pytest.fixture
async def receiver() -> AsyncIterator[OtlpReceiver]:
    async with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture
async def make_tracer() -> AsyncIterator[MakeTracer]:
    """Tracers with their own public key: the SDK shares one client per key across the process."""
    tracers: list[LangfuseTracer] = []

    def make(base_url: str, **options: Any) -> LangfuseTracer:
        options.setdefault("public_key", f"pk-lf-{uuid.uuid4().hex}")
        tracer = LangfuseTracer(secret_key=SECRET, base_url=base_url, environment="test", **options)
        tracers.append(tracer)
        return tracer

    yield make
    for tracer in tracers:
        await tracer.shutdown()


def start(tracer: LangfuseTracer | NoopTracer, run_id: str = "run-1", thread_id: str = "thread-1") -> RunTrace:
    return tracer.start_run(
        name="run",
        run_id=run_id,
        thread_id=thread_id,
        org_id="org-1",
        agent_id="agent-1",
        input={"message": "hello"},
        metadata={"channel": "api"},
    )


def children_of(root: ReceivedSpan, spans: list[ReceivedSpan]) -> set[str]:
    return {span.name for span in spans if span.parent_span_id == root.span_id}


@contextmanager
def nothing_listening() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    yield f"http://127.0.0.1:{port}"


async def test_a_run_is_one_trace_with_its_model_and_tool_calls_under_the_root(
    receiver: OtlpReceiver, make_tracer: MakeTracer
) -> None:
    tracer = make_tracer(receiver.base_url)

    run = start(tracer)
    generation = run.generation(
        "llm", model="gpt-4o-mini", model_parameters={"temperature": 0.2}, input=[{"role": "user"}]
    )
    generation.end(output="a prompt please", usage=Usage(input_tokens=12, output_tokens=5))
    span = run.span(
        "mcp_prompt_retrieval",
        input={"promptName": "greeting"},
        metadata={"integrationId": "int-1", "promptName": "greeting", "operationType": "prompt_retrieval"},
    )
    span.end(output="Prompt: greeting")
    run.end(output={"answer": "hi"})
    await tracer.flush()

    spans = await receiver.wait_for_spans(3)
    root = receiver.span("run")
    assert root.parent_span_id is None
    assert children_of(root, spans) == {"llm", "mcp_prompt_retrieval"}
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert run.trace_id == root.trace_id
    assert root.json_attribute("langfuse.observation.input") == {"message": "hello"}
    assert root.json_attribute("langfuse.observation.output") == {"answer": "hi"}
    for observed in spans:
        assert observed.attributes["session.id"] == "thread-1"
        assert observed.attributes["langfuse.trace.name"] == "run"
        assert observed.attributes["langfuse.environment"] == "test"
        assert observed.json_attribute("langfuse.trace.metadata.org_id") == "org-1"
        assert observed.json_attribute("langfuse.trace.metadata.agent_id") == "agent-1"
        assert observed.json_attribute("langfuse.trace.metadata.run_id") == "run-1"
        assert observed.json_attribute("langfuse.trace.metadata.channel") == "api"


async def test_each_observation_has_the_times_its_operation_began_and_ended(
    receiver: OtlpReceiver, make_tracer: MakeTracer
) -> None:
    """The SDK gets a run's observations later, not as they happen (a little later, or when flushed): their
    times must still be those of the run."""
    tracer = make_tracer(receiver.base_url)

    times = [time.time_ns()]
    run = start(tracer)
    times.append(time.time_ns())
    generation = run.generation("llm", model="m", model_parameters={}, input="hi")
    times.append(time.time_ns())
    generation.end(output="hello")
    times.append(time.time_ns())
    span = run.span("tool")
    times.append(time.time_ns())
    span.end()
    times.append(time.time_ns())
    run.end()
    times.append(time.time_ns())
    await tracer.flush()

    await receiver.wait_for_spans(3)
    root, llm, tool = receiver.span("run"), receiver.span("llm"), receiver.span("tool")
    assert times[0] <= root.started_ns <= times[1] <= llm.started_ns <= times[2]
    assert times[2] <= llm.ended_ns <= times[3] <= tool.started_ns <= times[4]
    assert times[4] <= tool.ended_ns <= times[5] <= root.ended_ns <= times[6]


async def test_tracing_switched_off_in_the_sdk_records_nothing_and_shows_no_trace_id(
    receiver: OtlpReceiver, make_tracer: MakeTracer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGFUSE_TRACING_ENABLED", "false")
    tracer = make_tracer(receiver.base_url)

    run = start(tracer)
    run.span("tool").end()
    run.end()
    await tracer.flush()
    await tracer.shutdown()

    assert run.trace_id is None
    assert receiver.requests == []


async def test_a_generation_carries_model_parameters_and_usage(receiver: OtlpReceiver, make_tracer: MakeTracer) -> None:
    tracer = make_tracer(receiver.base_url)

    run = start(tracer)
    run.generation(
        "llm", model="gpt-4o-mini", model_parameters={"temperature": 0.2, "max_tokens": 256}, input="hi"
    ).end(output="hello", usage=Usage(input_tokens=12, output_tokens=5), model="gpt-4o-mini-2024-07-18")
    run.end()
    await tracer.flush()

    generation = await receiver.wait_for_span("llm")
    assert generation.attributes["langfuse.observation.type"] == "generation"
    assert generation.attributes["langfuse.observation.model.name"] == "gpt-4o-mini-2024-07-18"
    assert generation.json_attribute("langfuse.observation.model.parameters") == {
        "temperature": 0.2,
        "max_tokens": 256,
    }
    assert generation.json_attribute("langfuse.observation.usage_details") == {
        "input": 12,
        "output": 5,
        "total": 17,
    }
    assert generation.attributes["langfuse.observation.input"] == "hi"
    assert generation.attributes["langfuse.observation.output"] == "hello"
    assert "langfuse.observation.level" not in generation.attributes


async def test_a_failed_tool_call_is_an_error_span_with_its_metadata(
    receiver: OtlpReceiver, make_tracer: MakeTracer
) -> None:
    tracer = make_tracer(receiver.base_url)

    run = start(tracer)
    span = run.span(
        "mcp_prompt_retrieval",
        input={"integrationId": "int-1", "promptName": "greeting"},
        metadata={"integrationId": "int-1", "promptName": "greeting", "operationType": "prompt_retrieval"},
    )
    span.end(
        output="Prompt retrieval failed",
        level=Level.ERROR,
        status_message="MCP server timed out",
        metadata={"isError": True},
    )
    run.end()
    await tracer.flush()

    failed = await receiver.wait_for_span("mcp_prompt_retrieval")
    assert failed.attributes["langfuse.observation.type"] == "span"
    assert failed.attributes["langfuse.observation.level"] == "ERROR"
    assert failed.attributes["langfuse.observation.status_message"] == "MCP server timed out"
    assert (failed.status_code, failed.status_message) == ("ERROR", "MCP server timed out")
    assert failed.json_attribute("langfuse.observation.metadata.integrationId") == "int-1"
    assert failed.json_attribute("langfuse.observation.metadata.promptName") == "greeting"
    assert failed.json_attribute("langfuse.observation.metadata.operationType") == "prompt_retrieval"
    assert failed.json_attribute("langfuse.observation.metadata.isError") is True
    assert failed.attributes["langfuse.observation.output"] == "Prompt retrieval failed"


async def test_a_failed_model_call_and_a_failed_run_are_errors(receiver: OtlpReceiver, make_tracer: MakeTracer) -> None:
    tracer = make_tracer(receiver.base_url)

    run = start(tracer)
    run.generation("llm", model="gpt-4o-mini", model_parameters={}, input="hi").end(
        level=Level.ERROR, status_message="rate limited"
    )
    run.end(level=Level.ERROR, status_message="model unavailable")
    await tracer.flush()

    await receiver.wait_for_spans(2)
    generation, root = receiver.span("llm"), receiver.span("run")
    assert generation.attributes["langfuse.observation.level"] == "ERROR"
    assert generation.attributes["langfuse.observation.status_message"] == "rate limited"
    assert "langfuse.observation.usage_details" not in generation.attributes
    assert root.attributes["langfuse.observation.level"] == "ERROR"
    assert root.attributes["langfuse.observation.status_message"] == "model unavailable"


async def test_concurrent_runs_keep_their_own_traces(receiver: OtlpReceiver, make_tracer: MakeTracer) -> None:
    tracer = make_tracer(receiver.base_url)
    started = {"a": asyncio.Event(), "b": asyncio.Event()}
    called_model = {"a": asyncio.Event(), "b": asyncio.Event()}

    async def traced_run(me: str, other: str) -> str | None:
        run = start(tracer, run_id=f"run-{me}", thread_id=f"thread-{me}")
        started[me].set()
        await started[other].wait()
        run.generation(f"llm-{me}", model="m", model_parameters={}, input=me).end(output=me)
        called_model[me].set()
        await called_model[other].wait()
        run.span(f"tool-{me}").end(output=me)
        run.end()
        return run.trace_id

    trace_a, trace_b = await asyncio.gather(traced_run("a", "b"), traced_run("b", "a"))
    await tracer.flush()

    spans = await receiver.wait_for_spans(6)
    roots = {s.attributes["session.id"]: s for s in spans if s.parent_span_id is None}
    assert set(roots) == {"thread-a", "thread-b"}
    for me, trace_id in (("a", trace_a), ("b", trace_b)):
        root = roots[f"thread-{me}"]
        assert root.trace_id == trace_id
        assert children_of(root, spans) == {f"llm-{me}", f"tool-{me}"}
        mine = [s for s in spans if s.trace_id == trace_id]
        assert {s.attributes["session.id"] for s in mine} == {f"thread-{me}"}
        assert {s.json_attribute("langfuse.trace.metadata.run_id") for s in mine} == {f"run-{me}"}
    assert trace_a != trace_b


async def test_a_run_never_nests_under_a_span_current_in_the_caller(
    receiver: OtlpReceiver, make_tracer: MakeTracer
) -> None:
    tracer = make_tracer(receiver.base_url)
    foreign = TracerProvider().get_tracer("http-server").start_span("POST /threads/{id}/runs")

    with otel_trace.use_span(foreign, end_on_exit=True):
        run = start(tracer)
        run.span("tool").end()
        run.end()
    await tracer.flush()

    await receiver.wait_for_spans(2)
    root = receiver.span("run")
    assert root.parent_span_id is None
    assert root.trace_id != format(foreign.get_span_context().trace_id, "032x")
    assert receiver.span("tool").parent_span_id == root.span_id


async def test_a_collector_answering_500_fails_nothing_and_tracing_recovers(
    receiver: OtlpReceiver, make_tracer: MakeTracer
) -> None:
    tracer = make_tracer(receiver.base_url)
    receiver.status = 500

    first = start(tracer, run_id="run-lost")
    first.span("tool").end()
    first.end()
    await tracer.flush()

    await receiver.wait_for_requests(1)
    assert [r.answered for r in receiver.requests] == [500]
    assert receiver.spans == []

    receiver.status = 200
    second = start(tracer, run_id="run-kept")
    second.end()
    await tracer.flush()

    root = await receiver.wait_for_span("run")
    assert root.json_attribute("langfuse.trace.metadata.run_id") == "run-kept"
    assert root.trace_id == second.trace_id


async def test_a_collector_that_is_not_listening_fails_nothing(make_tracer: MakeTracer) -> None:
    with nothing_listening() as base_url:
        tracer = make_tracer(base_url, timeout_seconds=1)

        run = start(tracer)
        run.generation("llm", model="m", model_parameters={}, input="hi").end(usage=Usage(input_tokens=1))
        run.span("tool").end(level=Level.ERROR, status_message="boom")
        run.end()
        await asyncio.wait_for(tracer.flush(), timeout=10)

    assert run.trace_id is not None


async def test_a_stalled_collector_does_not_hold_up_runs(receiver: OtlpReceiver, make_tracer: MakeTracer) -> None:
    tracer = make_tracer(receiver.base_url)
    receiver.hold()
    first = start(tracer, run_id="run-first")
    first.end()
    flushing = asyncio.create_task(tracer.flush())
    await receiver.wait_for_requests(1)

    second = start(tracer, run_id="run-second")
    second.generation("llm", model="m", model_parameters={}, input="hi").end(output="hello")
    second.span("tool").end()
    second.end()

    assert receiver.waiting == 1, "the second run waited for the stalled export"
    receiver.release()
    await flushing
    await tracer.flush()
    spans = await receiver.wait_for_spans(4)
    assert {s.json_attribute("langfuse.trace.metadata.run_id") for s in spans} == {"run-first", "run-second"}


async def test_data_uris_stay_in_the_trace_and_nothing_but_the_collector_is_contacted(
    receiver: OtlpReceiver, make_tracer: MakeTracer
) -> None:
    tracer = make_tracer(receiver.base_url)
    image = "data:image/png;base64," + base64.b64encode(b"\x89PNG not really").decode()

    run = start(tracer)
    run.span("tool", input={"image": image}).end(output=image)
    run.end()
    await tracer.flush()

    span = await receiver.wait_for_span("tool")
    assert span.json_attribute("langfuse.observation.input") == {"image": image}
    assert span.attributes["langfuse.observation.output"] == image
    await receiver.wait_for_span("run")
    assert {r.path for r in receiver.requests} == {TRACES_PATH}


async def test_the_secret_key_is_sent_to_the_collector_but_never_logged(
    receiver: OtlpReceiver, make_tracer: MakeTracer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    tracer = make_tracer(receiver.base_url, public_key="pk-lf-logged")
    receiver.status = 500

    run = start(tracer)
    run.span("tool").end(level=Level.ERROR, status_message="boom")
    run.end()
    await tracer.flush()
    await receiver.wait_for_requests(1)
    await tracer.shutdown()

    credentials = base64.b64encode(f"pk-lf-logged:{SECRET}".encode()).decode()
    assert receiver.requests[0].headers["authorization"] == f"Basic {credentials}"
    assert caplog.records
    assert SECRET not in caplog.text
    assert credentials not in caplog.text


async def test_a_shut_down_tracer_traces_nothing_and_fails_nothing(
    receiver: OtlpReceiver, make_tracer: MakeTracer
) -> None:
    tracer = make_tracer(receiver.base_url)
    await tracer.shutdown()

    run = start(tracer)
    run.generation("llm", model="m", model_parameters={}, input="hi").end(output="hello")
    run.span("tool").end()
    run.end()
    await tracer.flush()
    await tracer.shutdown()

    assert run.trace_id is None


async def test_a_new_tracer_with_the_key_of_a_shut_down_one_exports_to_its_own_collector(
    make_tracer: MakeTracer,
) -> None:
    async with OtlpReceiver() as old, OtlpReceiver() as new:
        await make_tracer(old.base_url, public_key="pk-lf-restarted").shutdown()
        tracer = make_tracer(new.base_url, public_key="pk-lf-restarted")

        start(tracer).end()
        await tracer.flush()

        root = await new.wait_for_span("run")
        assert root.attributes["session.id"] == "thread-1"
        assert old.requests == []


async def test_tracing_off_records_nothing_and_shows_no_trace_id() -> None:
    tracer = NoopTracer()

    run = start(tracer)
    run.generation("llm", model="m", model_parameters={}, input="hi").end(usage=Usage(input_tokens=1))
    run.span("mcp_prompt_retrieval").end(level=Level.ERROR, status_message="boom")
    run.end(output="done")
    await tracer.flush()

    assert run.trace_id is None
