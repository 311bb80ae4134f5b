"""TICKET-031: MCP prompt retrieval in the run loop, with fakes of the ports."""

import logging
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest

from application.errors import McpConnectionFailed
from application.ports.llm import ModelToolCall
from application.ports.mcp import McpPromptArgument, McpPromptInfo
from application.ports.tracing import Level
from application.runs.tools.assembly import RETRIEVE_PROMPT, ToolAssembler
from application.runs.tools.handler import ToolContext
from application.runs.tools.mcp import McpPromptRetrieval
from application.use_cases.mcp_operations import GetMcpPrompt
from domain.agents import Agent
from domain.ids import OrgId, RunId, ThreadId
from domain.mcp_prompts import PromptMessage, PromptResult
from domain.tools import Tool, ToolType
from tests import builders
from tests.unit.fakes.persistence import FakeUnitOfWork, Store
from tests.unit.fakes.ports import Commands, FakeGateway, PlainSecrets, RecordingTrace, Sandbox, Search

NOW = datetime(2026, 11, 22, tzinfo=UTC)
ORG = OrgId(uuid4())
INTEGRATION = builders.integration(ORG, name="Support", slug="support")
GREETING = PromptResult(
    description="A friendly greeting template for customer support interactions",
    messages=(
        PromptMessage(role="system", content="You are a helpful customer support agent."),
        PromptMessage(role="user", content="My order is late"),
        PromptMessage(role="assistant", content="Thank you for contacting us!"),
    ),
)
PROMPTS = [
    McpPromptInfo(name="customer_support_greeting", arguments=(McpPromptArgument(name="topic"),)),
    McpPromptInfo(name="plain"),
]


def agent(**overrides: Any) -> Agent:
    return builders.agent(ORG, **({"name": "Bot", "slug": "bot"} | overrides))


def retrieval(gateway: FakeGateway) -> McpPromptRetrieval:
    return McpPromptRetrieval(
        GetMcpPrompt(FakeUnitOfWork(Store(integrations={INTEGRATION.id: INTEGRATION})), PlainSecrets(), gateway)
    )


async def call(
    handler: McpPromptRetrieval, arguments: dict[str, Any], trace: RecordingTrace | None = None
) -> tuple[str, bool]:
    tool = Tool(name=RETRIEVE_PROMPT, description="", parameters={}, type=ToolType.MCP_PROMPT)
    context = ToolContext(
        org_id=ORG, run_id=RunId(uuid4()), thread_id=ThreadId(uuid4()), agent=agent(), trace=trace or RecordingTrace()
    )
    outcome = await handler(ModelToolCall(id="call_1", name=RETRIEVE_PROMPT, arguments=arguments), tool, context)
    return outcome.text, outcome.is_error


async def test_retrieves_a_prompt_with_arguments_and_returns_it_formatted() -> None:
    gateway = FakeGateway(prompts=PROMPTS, prompt=GREETING)
    text, is_error = await call(
        retrieval(gateway),
        {
            "integrationId": str(INTEGRATION.id),
            "promptName": "customer_support_greeting",
            "arguments": {"topic": "orders"},
        },
    )
    assert not is_error
    assert gateway.prompt_requests == [("customer_support_greeting", {"topic": "orders"})]
    assert text == (
        "Prompt: customer_support_greeting\n"
        "Description: A friendly greeting template for customer support interactions\n"
        "\nMessages:\n"
        "1. System: You are a helpful customer support agent.\n"
        "2. User: My order is late\n"
        "3. Assistant: Thank you for contacting us!\n"
    )


async def test_retrieves_a_prompt_without_arguments_and_without_a_description() -> None:
    gateway = FakeGateway(
        prompts=PROMPTS, prompt=PromptResult(description=None, messages=(PromptMessage(role="user", content="Hi"),))
    )
    text, is_error = await call(retrieval(gateway), {"integrationId": str(INTEGRATION.id), "promptName": "plain"})
    assert not is_error
    assert gateway.prompt_requests == [("plain", {})]
    assert text == "Prompt: plain\n\nMessages:\n1. User: Hi\n"


async def test_a_failure_is_returned_to_the_model_not_raised() -> None:
    gateway = FakeGateway(prompts=PROMPTS, failure=McpConnectionFailed("cannot connect to the MCP server"))
    trace = RecordingTrace()
    text, is_error = await call(
        retrieval(gateway), {"integrationId": str(INTEGRATION.id), "promptName": "plain"}, trace
    )
    assert is_error and text == "Prompt retrieval failed: cannot connect to the MCP server"
    [span] = trace.spans
    assert span.name == "mcp_prompt_retrieval" and span.level is Level.ERROR
    assert span.ended is not None and span.ended["status_message"] == "cannot connect to the MCP server"


async def test_an_unknown_integration_is_a_failure_for_the_model() -> None:
    text, is_error = await call(
        retrieval(FakeGateway(prompts=PROMPTS)), {"integrationId": "nope", "promptName": "plain"}
    )
    assert is_error and text == "Prompt retrieval failed: MCP integration nope not found"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"promptName": "plain"}, "Prompt retrieval failed: integrationId parameter is required"),
        ({"integrationId": "", "promptName": "plain"}, "Prompt retrieval failed: integrationId parameter is required"),
        ({"integrationId": str(INTEGRATION.id)}, "Prompt retrieval failed: promptName parameter is required"),
    ],
)
async def test_missing_parameters_are_errors_for_the_model(arguments: dict[str, Any], expected: str) -> None:
    gateway = FakeGateway(prompts=PROMPTS, prompt=GREETING)
    text, is_error = await call(retrieval(gateway), arguments)
    assert (text, is_error) == (expected, True)
    assert gateway.prompt_requests == []


async def test_role_labels_are_capitalised() -> None:
    result = PromptResult(
        description=None,
        messages=(PromptMessage(role="assistant", content="ok"), PromptMessage(role="tool", content="x")),
    )
    text, _ = await call(
        retrieval(FakeGateway(prompts=PROMPTS, prompt=result)),
        {"integrationId": str(INTEGRATION.id), "promptName": "plain"},
    )
    assert "1. Assistant: ok\n2. Tool: x\n" in text


async def test_retrievals_are_logged_and_traced_with_their_metadata(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="application.runs.tools.mcp")
    trace = RecordingTrace()
    await call(
        retrieval(FakeGateway(prompts=PROMPTS, prompt=GREETING)),
        {"integrationId": str(INTEGRATION.id), "promptName": "customer_support_greeting", "arguments": {"topic": "x"}},
        trace,
    )
    start, success = [r for r in caplog.records if r.name == "application.runs.tools.mcp"]
    assert start.getMessage() == "Retrieving MCP prompt"
    assert (vars(start)["integrationId"], vars(start)["promptName"], vars(start)["hasArguments"]) == (
        str(INTEGRATION.id),
        "customer_support_greeting",
        True,
    )
    assert success.getMessage() == "MCP prompt retrieval succeeded"
    assert vars(success)["messageCount"] == 3
    [span] = trace.spans
    assert span.metadata == {
        "integrationId": str(INTEGRATION.id),
        "promptName": "customer_support_greeting",
        "operationType": "prompt_retrieval",
    }

    caplog.clear()
    await call(
        retrieval(FakeGateway(prompts=PROMPTS, failure=McpConnectionFailed("down"))),
        {"integrationId": str(INTEGRATION.id), "promptName": "plain"},
    )
    [failure] = [r for r in caplog.records if r.name == "application.runs.tools.mcp" and r.levelno == logging.ERROR]
    assert failure.getMessage() == "MCP prompt retrieval failed"
    assert (vars(failure)["promptName"], vars(failure)["error"]) == ("plain", "down")


def assembler(gateway: FakeGateway) -> ToolAssembler:
    return ToolAssembler(
        FakeUnitOfWork(Store(integrations={INTEGRATION.id: INTEGRATION})),
        PlainSecrets(),
        gateway,
        Commands(),
        Search(available=False),
        Sandbox(available=False),
    )


async def test_the_tool_is_offered_only_when_the_agent_has_mcp_integrations() -> None:
    gateway = FakeGateway(prompts=PROMPTS)
    without = await assembler(gateway).assemble(agent())
    assert RETRIEVE_PROMPT not in without.names
    with_mcp = await assembler(gateway).assemble(agent(mcp_integration_ids=(INTEGRATION.id,)))
    tool = with_mcp.get(RETRIEVE_PROMPT)
    assert tool is not None and tool.type is ToolType.MCP_PROMPT
    assert tool.parameters["required"] == ["integrationId", "promptName"]
    assert set(tool.parameters["properties"]) == {"integrationId", "promptName", "arguments"}
    assert tool.parameters["properties"]["arguments"]["type"] == "object"
    assert str(INTEGRATION.id) in tool.description and "customer_support_greeting(topic)" in tool.description


async def test_the_tool_is_offered_even_when_the_integration_cannot_be_reached() -> None:
    assembled = await assembler(FakeGateway(failure=McpConnectionFailed("down"))).assemble(
        agent(mcp_integration_ids=(INTEGRATION.id,))
    )
    assert RETRIEVE_PROMPT in assembled.names
    assert any("'support' was skipped" in w for w in assembled.warnings)
