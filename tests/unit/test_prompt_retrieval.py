"""TICKET-031: MCP prompt retrieval in the run loop, with fakes of the ports."""

import logging
from datetime import UTC, datetime
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
from domain.ids import AgentId, IntegrationId, OrgId, RunId, ThreadId
from domain.integrations import McpIntegration
from domain.mcp_prompts import PromptMessage, PromptResult
from domain.tools import Tool, ToolType
from tests.unit.fakes import FakeGateway, FakeTrace, FakeUnitOfWork, NoCommands, PlainSecrets, Unavailable

NOW = datetime(2026, 11, 22, tzinfo=UTC)
ORG = OrgId(uuid4())
INTEGRATION = McpIntegration(
    id=IntegrationId(uuid4()),
    org_id=ORG,
    name="Support",
    slug="support",
    url="https://mcp.example/mcp",
    created_at=NOW,
    updated_at=NOW,
)
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


def agent(**overrides: object) -> Agent:
    fields: dict = dict(
        id=AgentId(uuid4()), org_id=ORG, name="Bot", slug="bot", model="m", created_at=NOW, updated_at=NOW
    )
    return Agent(**(fields | overrides))


def retrieval(gateway: FakeGateway) -> McpPromptRetrieval:
    return McpPromptRetrieval(GetMcpPrompt(FakeUnitOfWork(integrations=[INTEGRATION]), PlainSecrets(), gateway))


async def call(handler: McpPromptRetrieval, arguments: dict, trace: FakeTrace | None = None) -> tuple[str, bool]:
    tool = Tool(name=RETRIEVE_PROMPT, description="", parameters={}, type=ToolType.MCP_PROMPT)
    context = ToolContext(
        org_id=ORG, run_id=RunId(uuid4()), thread_id=ThreadId(uuid4()), agent=agent(), trace=trace or FakeTrace()
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
    trace = FakeTrace()
    text, is_error = await call(
        retrieval(gateway), {"integrationId": str(INTEGRATION.id), "promptName": "plain"}, trace
    )
    assert is_error and text == "Prompt retrieval failed: cannot connect to the MCP server"
    [span] = trace.spans
    assert span.name == "mcp_prompt_retrieval" and span.level is Level.ERROR
    assert span.ended["status_message"] == "cannot connect to the MCP server"


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
async def test_missing_parameters_are_errors_for_the_model(arguments: dict, expected: str) -> None:
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
    trace = FakeTrace()
    await call(
        retrieval(FakeGateway(prompts=PROMPTS, prompt=GREETING)),
        {"integrationId": str(INTEGRATION.id), "promptName": "customer_support_greeting", "arguments": {"topic": "x"}},
        trace,
    )
    start, success = [r for r in caplog.records if r.name == "application.runs.tools.mcp"]
    assert start.getMessage() == "Retrieving MCP prompt"
    assert (start.integrationId, start.promptName, start.hasArguments) == (
        str(INTEGRATION.id),
        "customer_support_greeting",
        True,
    )  # type: ignore[attr-defined]
    assert success.getMessage() == "MCP prompt retrieval succeeded"
    assert success.messageCount == 3  # type: ignore[attr-defined]
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
    assert (failure.promptName, failure.error) == ("plain", "down")  # type: ignore[attr-defined]


def assembler(gateway: FakeGateway) -> ToolAssembler:
    return ToolAssembler(
        FakeUnitOfWork(integrations=[INTEGRATION]),
        PlainSecrets(),
        gateway,
        NoCommands(),
        Unavailable(),
        Unavailable(),  # type: ignore[arg-type]
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
