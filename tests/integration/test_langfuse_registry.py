"""The seam into the langfuse SDK's private state, on the installed SDK: fails when a langfuse release moves
what the tracer reaches into (then check the new internals and the pin in pyproject.toml)."""

import uuid
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from langfuse import Langfuse
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

from infrastructure.tracing.langfuse_registry import LangfuseRegistry
from tests.fakes.otlp_receiver import OtlpReceiver

MakeClient = Callable[[str, TracerProvider], Langfuse]


@pytest.fixture
async def receiver() -> AsyncIterator[OtlpReceiver]:
    async with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture
def make_client(receiver: OtlpReceiver) -> Iterator[MakeClient]:
    made: list[tuple[str, Langfuse, TracerProvider]] = []

    def make(public_key: str, provider: TracerProvider) -> Langfuse:
        client = Langfuse(
            public_key=public_key, secret_key="sk-lf-test", base_url=receiver.base_url, tracer_provider=provider
        )
        made.append((public_key, client, provider))
        return client

    yield make
    for public_key, client, provider in made:
        client.shutdown()
        LangfuseRegistry.forget(client, public_key)
        provider.shutdown()


def test_a_client_with_a_new_key_exports_through_its_own_provider(make_client: MakeClient) -> None:
    provider = TracerProvider()

    client = make_client(f"pk-lf-{uuid.uuid4().hex}", provider)

    assert LangfuseRegistry.tracer_provider(client) is provider


def test_a_clients_observations_start_in_a_tracer_of_its_provider(make_client: MakeClient) -> None:
    provider = TracerProvider()

    client = make_client(f"pk-lf-{uuid.uuid4().hex}", provider)
    span = LangfuseRegistry.otel_tracer(client).start_span("probe", start_time=1_000)
    span.end(end_time=2_000)

    assert isinstance(span, ReadableSpan) and (span.start_time, span.end_time) == (1_000, 2_000)
    assert span.resource is provider.resource
    assert span.instrumentation_scope is not None and span.instrumentation_scope.name == "langfuse-sdk"


def test_a_second_client_with_a_taken_key_is_seen_to_share_the_first_ones_provider(make_client: MakeClient) -> None:
    key, first_provider = f"pk-lf-{uuid.uuid4().hex}", TracerProvider()
    make_client(key, first_provider)

    second = make_client(key, TracerProvider())

    assert LangfuseRegistry.tracer_provider(second) is first_provider


def test_a_forgotten_key_gives_the_next_client_its_own_provider(make_client: MakeClient) -> None:
    key = f"pk-lf-{uuid.uuid4().hex}"
    first = make_client(key, TracerProvider())
    first.shutdown()

    LangfuseRegistry.forget(first, key)
    provider = TracerProvider()
    second = make_client(key, provider)

    assert LangfuseRegistry.tracer_provider(second) is provider


def test_forgetting_an_old_client_leaves_the_newer_state_of_its_key_alone(make_client: MakeClient) -> None:
    key = f"pk-lf-{uuid.uuid4().hex}"
    first = make_client(key, TracerProvider())
    LangfuseRegistry.forget(first, key)
    provider = TracerProvider()
    make_client(key, provider)

    LangfuseRegistry.forget(first, key)
    third = make_client(key, TracerProvider())

    assert LangfuseRegistry.tracer_provider(third) is provider
