import uuid
from collections.abc import AsyncIterator

import pytest
from dependency_injector import providers

from infrastructure.container import Container
from infrastructure.llm import language_model
from infrastructure.tracing import LangfuseTracer
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.otlp_receiver import OtlpReceiver


@pytest.fixture(scope="module")
async def mcp_server() -> AsyncIterator[FakeMcpServer]:
    async with FakeMcpServer() as server:
        yield server


@pytest.fixture
async def openai(executing: list[Container]) -> AsyncIterator[FakeOpenAI]:
    """Agents whose model is not the offline one talk to this fake provider, through the real SDK."""
    async with FakeOpenAI() as fake:
        model = language_model(
            openai_api_key="sk-test", openai_base_url=fake.base_url, max_retries=2, timeout_seconds=10
        )
        for container in executing:
            container.llm.override(providers.Object(model))
        try:
            yield fake
        finally:
            for container in executing:
                container.llm.reset_override()
            await model.aclose()


@pytest.fixture
async def traced(executing: list[Container]) -> AsyncIterator[tuple[LangfuseTracer, OtlpReceiver]]:
    async with OtlpReceiver() as receiver:
        tracer = LangfuseTracer(
            public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test", base_url=receiver.base_url
        )
        for container in executing:
            container.tracer.override(providers.Object(tracer))
        try:
            yield tracer, receiver
        finally:
            for container in executing:
                container.tracer.reset_override()
            await tracer.shutdown()
