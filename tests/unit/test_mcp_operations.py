"""The MCP operations on fakes: calling a tool, getting a prompt, reading and importing a resource; and
the run's handlers of MCP tool calls and resource retrieval, which tell the model what failed."""

from typing import Any
from uuid import uuid4

import pytest

from application.errors import (
    InvalidReference,
    McpConnectionFailed,
    McpIntegrationDisabled,
    McpIntegrationNotFound,
    McpPromptNotFound,
    McpTimeout,
    McpToolNotFound,
)
from application.ports.mcp import (
    McpContentPart,
    McpPromptInfo,
    McpResourceContent,
    McpResourceInfo,
    McpToolInfo,
    McpToolResult,
)
from application.ports.tracing import Level
from application.runs.tools.assembly import RETRIEVE_RESOURCE
from application.runs.tools.handler import ToolContext
from application.runs.tools.mcp import McpResourceRetrieval, McpToolCall
from application.use_cases.mcp_operations import (
    ExecuteMcpTool,
    ExecuteMcpToolCommand,
    GetMcpPrompt,
    GetMcpPromptQuery,
    ReadMcpResource,
    ReadMcpResourceQuery,
    RetrieveMcpResource,
    RetrieveMcpResourceCommand,
    text_for_model,
)
from domain.agents import Agent
from domain.errors import InvalidValue
from domain.ids import AgentId, IntegrationId, OrgId, RunId, ThreadId
from domain.integrations import FilterMode, McpIntegration, ToolFilter
from domain.mcp_prompts import PromptResult
from domain.organizations import Organization
from domain.sources import CreatedBy, SourceKind, SourceOrigin, TableData
from domain.threads import Thread
from domain.tools import Tool, ToolType
from tests.unit.fakes.app import FakeApp
from tests.unit.fakes.ports import FakeGateway, RecordingTrace, call

TOOLS = [
    McpToolInfo(name="search", description="Search memos", input_schema={"type": "object"}),
    McpToolInfo(name="purge", description="Delete every memo", input_schema={"type": "object"}),
]
OK = McpToolResult(parts=(McpContentPart(type="text", text="3 memos found"),), structured=None, is_error=False)
MAX_BYTES = 1_000


@pytest.fixture
def app() -> FakeApp:
    return FakeApp(gateway=FakeGateway(tools=TOOLS, result=OK))


async def setup(app: FakeApp, **integration: Any) -> tuple[Organization, McpIntegration, Agent, Thread]:
    org = await app.organization()
    found = await app.integration(org, **integration)
    agent = await app.agent(org, mcp_integration_ids=(found.id,))
    return org, found, agent, await app.thread(agent)


def execute(app: FakeApp) -> ExecuteMcpTool:
    return ExecuteMcpTool(app.uow, app.secrets, app.gateway)


def retrieve(app: FakeApp) -> RetrieveMcpResource:
    return RetrieveMcpResource(app.uow, app.clock, app.ids, app.secrets, app.gateway, max_source_bytes=MAX_BYTES)


def context(agent: Agent, thread: Thread, trace: RecordingTrace) -> ToolContext:
    return ToolContext(org_id=agent.org_id, run_id=RunId(thread.id), thread_id=thread.id, agent=agent, trace=trace)


# -- ExecuteMcpTool -----------------------------------------------------------------------------------------


async def test_a_tool_is_called_with_the_arguments_and_its_text_returned(app: FakeApp) -> None:
    org, integration, _, _ = await setup(app)
    command = ExecuteMcpToolCommand(
        org_id=org.id, integration_id=integration.id, tool_name="search", arguments={"q": "x"}
    )
    outcome = await execute(app).execute(command)
    assert (outcome.text, outcome.is_error) == ("3 memos found", False)
    assert app.gateway.tool_calls == [("search", {"q": "x"})]


async def test_a_tool_the_server_does_not_have_is_not_called(app: FakeApp) -> None:
    org, integration, _, _ = await setup(app)
    with pytest.raises(McpToolNotFound, match="'memo' has no tool 'drop'"):
        await execute(app).execute(
            ExecuteMcpToolCommand(org_id=org.id, integration_id=integration.id, tool_name="drop")
        )
    assert app.gateway.tool_calls == []


async def test_a_tool_the_filter_leaves_out_is_not_called(app: FakeApp) -> None:
    org, integration, _, _ = await setup(app, tool_filter=ToolFilter(mode=FilterMode.INCLUDE, names=("search",)))
    with pytest.raises(McpToolNotFound):
        await execute(app).execute(
            ExecuteMcpToolCommand(org_id=org.id, integration_id=integration.id, tool_name="purge")
        )
    assert app.gateway.tool_calls == []


async def test_tools_of_a_disabled_or_another_organizations_integration_are_not_called(app: FakeApp) -> None:
    org, integration, _, _ = await setup(app, enabled=False)
    other = await app.organization()
    with pytest.raises(McpIntegrationDisabled):
        await execute(app).execute(
            ExecuteMcpToolCommand(org_id=org.id, integration_id=integration.id, tool_name="search")
        )
    with pytest.raises(McpIntegrationNotFound):
        await execute(app).execute(
            ExecuteMcpToolCommand(org_id=other.id, integration_id=integration.id, tool_name="search")
        )
    assert app.gateway.targets == []


def test_the_model_reads_every_kind_of_content_part() -> None:
    result = McpToolResult(
        parts=(
            McpContentPart(type="text", text="Found it"),
            McpContentPart(type="resource", text="memo body", uri="memo://1"),
            McpContentPart(type="resource_link", uri="memo://2", name="Second", mime_type="text/plain"),
            McpContentPart(type="resource_link", uri="memo://3"),
            McpContentPart(type="image", data="aGk=", mime_type="image/png"),
            McpContentPart(type="audio", data="aGk="),
        ),
        structured={"count": 1},
        is_error=False,
    )
    assert text_for_model(result) == (
        "Found it\n"
        "[resource memo://1]\nmemo body\n"
        "[resource link: Second (memo://2, text/plain)]\n"
        "[resource link: memo://3 (memo://3, unknown type)]\n"
        "[image: image/png]\n"
        "[audio: unknown type]"
    )


def test_structured_content_is_read_as_json_when_there_is_no_text() -> None:
    result = McpToolResult(parts=(), structured={"temperature": 21, "unit": "°C"}, is_error=False)
    assert text_for_model(result) == '{"temperature": 21, "unit": "°C"}'


# -- GetMcpPrompt, ReadMcpResource ------------------------------------------------------------------------------


async def test_a_prompt_the_server_does_not_list_is_not_requested(app: FakeApp) -> None:
    app.gateway = FakeGateway(prompts=[McpPromptInfo(name="greet")], prompt=PromptResult(description=None, messages=()))
    org, integration, _, _ = await setup(app)
    get = GetMcpPrompt(app.uow, app.secrets, app.gateway)
    with pytest.raises(McpPromptNotFound):
        await get.execute(GetMcpPromptQuery(org_id=org.id, integration_id=integration.id, prompt_name="other"))
    found = await get.execute(
        GetMcpPromptQuery(org_id=org.id, integration_id=integration.id, prompt_name="greet", arguments={"a": "b"})
    )
    assert found == app.gateway.prompt and app.gateway.prompt_requests == [("greet", {"a": "b"})]


async def test_a_resource_is_read_without_being_imported(app: FakeApp) -> None:
    contents = [McpResourceContent(uri="memo://1", mime_type="text/plain", text="hello")]
    app.gateway = FakeGateway(contents=contents)
    org, integration, _, _ = await setup(app)
    read = await ReadMcpResource(app.uow, app.secrets, app.gateway).execute(
        ReadMcpResourceQuery(org_id=org.id, integration_id=integration.id, uri="memo://1")
    )
    assert read == contents and app.gateway.reads == ["memo://1"] and app.store.sources == {}


# -- RetrieveMcpResource ------------------------------------------------------------------------------------------


def test_a_resource_is_imported_into_exactly_one_thread_or_agent() -> None:
    where: dict[str, Any] = {"org_id": OrgId(uuid4()), "integration_id": IntegrationId(uuid4()), "uri": "memo://1"}
    with pytest.raises(InvalidValue):
        RetrieveMcpResourceCommand(**where)
    with pytest.raises(InvalidValue):
        RetrieveMcpResourceCommand(**where, thread_id=ThreadId(uuid4()), agent_id=AgentId(uuid4()))


async def test_text_is_imported_as_a_text_source_named_from_the_catalog(app: FakeApp) -> None:
    app.gateway = FakeGateway(
        contents=[McpResourceContent(uri="memo://1", mime_type="text/plain", text="Buy milk")],
        resources=[McpResourceInfo(uri="memo://1", name="Shopping list")],
    )
    org, integration, _, thread = await setup(app)
    imported = await retrieve(app).execute(
        RetrieveMcpResourceCommand(org_id=org.id, integration_id=integration.id, uri="memo://1", thread_id=thread.id)
    )
    [source] = imported.sources
    assert app.store.sources == {source.id: source}
    assert (source.kind, source.name, source.text, source.size) == (SourceKind.TEXT, "Shopping list", "Buy milk", 8)
    assert (source.thread_id, source.agent_id, source.created_by) == (thread.id, None, CreatedBy.USER)
    assert source.origin == SourceOrigin(type="mcp_resource", integration_id=integration.id, uri="memo://1")
    assert imported.preview == "Shopping list: Buy milk"


async def test_csv_is_imported_as_a_table_and_binary_content_as_a_blob(app: FakeApp) -> None:
    app.gateway = FakeGateway(
        contents=[
            McpResourceContent(uri="files://data/sales.csv", mime_type=None, text="month,total\njan,3\n"),
            McpResourceContent(uri="files://logo.png", mime_type="image/png", blob=b"\x89PNG"),
        ],
        failing={"list_resources": McpTimeout("the catalog took too long")},
    )
    org, integration, agent, _ = await setup(app)
    imported = await retrieve(app).execute(
        RetrieveMcpResourceCommand(
            org_id=org.id, integration_id=integration.id, uri="files://", agent_id=agent.id, created_by=CreatedBy.LLM
        )
    )
    table, blob = imported.sources
    assert (table.kind, table.name, table.data) == (
        SourceKind.DATA,
        "sales.csv",
        TableData(headers=("month", "total"), rows=(("jan", "3"),)),
    )
    assert (blob.kind, blob.name, blob.blob, blob.size) == (SourceKind.BLOB, "logo.png", b"\x89PNG", 4)
    assert {s.agent_id for s in imported.sources} == {agent.id}
    assert imported.preview == "sales.csv: month,total\njan,3\n\nlogo.png: [binary content, image/png, 4 bytes]"


async def test_content_over_the_size_limit_is_not_imported(app: FakeApp) -> None:
    app.gateway = FakeGateway(
        contents=[
            McpResourceContent(uri="memo://small", mime_type="text/plain", text="ok"),
            McpResourceContent(uri="memo://big", mime_type="text/plain", text="x" * (MAX_BYTES + 1)),
        ]
    )
    org, integration, _, thread = await setup(app)
    with pytest.raises(InvalidValue, match=f"limited to {MAX_BYTES} bytes"):
        await retrieve(app).execute(
            RetrieveMcpResourceCommand(org_id=org.id, integration_id=integration.id, uri="memo://", thread_id=thread.id)
        )
    assert app.store.sources == {}


async def test_an_empty_resource_imports_nothing(app: FakeApp) -> None:
    app.gateway = FakeGateway(contents=[])
    org, integration, _, thread = await setup(app)
    imported = await retrieve(app).execute(
        RetrieveMcpResourceCommand(org_id=org.id, integration_id=integration.id, uri="memo://0", thread_id=thread.id)
    )
    assert imported.sources == [] and imported.preview == "(the resource is empty)"


async def test_a_resource_is_not_imported_into_another_organizations_thread(app: FakeApp) -> None:
    app.gateway = FakeGateway(contents=[McpResourceContent(uri="memo://1", mime_type="text/plain", text="x")])
    org, integration, _, _ = await setup(app)
    _, _, _, foreign_thread = await setup(app)
    with pytest.raises(InvalidReference):
        await retrieve(app).execute(
            RetrieveMcpResourceCommand(
                org_id=org.id, integration_id=integration.id, uri="memo://1", thread_id=foreign_thread.id
            )
        )
    assert app.gateway.reads == [] and app.store.sources == {}


async def test_a_resource_is_not_imported_into_another_organizations_agent(app: FakeApp) -> None:
    app.gateway = FakeGateway(contents=[McpResourceContent(uri="memo://1", mime_type="text/plain", text="x")])
    org, integration, _, _ = await setup(app)
    _, _, foreign_agent, _ = await setup(app)
    with pytest.raises(InvalidReference):
        await retrieve(app).execute(
            RetrieveMcpResourceCommand(
                org_id=org.id, integration_id=integration.id, uri="memo://1", agent_id=foreign_agent.id
            )
        )
    assert app.gateway.reads == [] and app.store.sources == {}


async def test_a_thread_deleted_while_the_resource_is_read_gets_no_source(app: FakeApp) -> None:
    org, integration, _, thread = await setup(app)

    class DeletesTheThread(FakeGateway):
        async def read_resource(self, target: object, uri: str) -> list[McpResourceContent]:
            app.store.threads.pop(thread.id)
            return [McpResourceContent(uri=uri, mime_type="text/plain", text="late")]

    app.gateway = DeletesTheThread()
    with pytest.raises(InvalidReference):
        await retrieve(app).execute(
            RetrieveMcpResourceCommand(
                org_id=org.id, integration_id=integration.id, uri="memo://1", thread_id=thread.id
            )
        )
    assert app.store.sources == {}


# -- the run's handlers: McpToolCall, McpResourceRetrieval ----------------------------------------------------------


def mcp_tool(integration: McpIntegration | str, remote: str) -> Tool:
    integration_id = integration if isinstance(integration, str) else str(integration.id)
    return Tool(
        name=f"memo__{remote}",
        description="",
        parameters={},
        type=ToolType.MCP_TOOL,
        metadata={"integration_id": integration_id, "tool_name": remote},
    )


async def test_an_mcp_tool_call_answers_the_model_with_the_tools_text(app: FakeApp) -> None:
    _, integration, agent, thread = await setup(app)
    trace = RecordingTrace()
    outcome = await McpToolCall(execute(app))(
        call("memo__search", {"q": "milk"}),
        mcp_tool(integration, "search"),
        context(agent, thread, trace),
    )
    assert (outcome.text, outcome.is_error) == ("3 memos found", False)
    assert app.gateway.tool_calls == [("search", {"q": "milk"})]
    [span] = trace.spans
    assert (span.name, span.metadata["toolName"], span.level) == ("mcp_tool_call", "search", Level.DEFAULT)


async def test_an_error_the_mcp_tool_reports_reaches_the_model_as_an_error(app: FakeApp) -> None:
    app.gateway = FakeGateway(
        tools=TOOLS,
        result=McpToolResult(parts=(McpContentPart(type="text", text="quota"),), structured=None, is_error=True),
    )
    _, integration, agent, thread = await setup(app)
    trace = RecordingTrace()
    outcome = await McpToolCall(execute(app))(
        call("memo__search"), mcp_tool(integration, "search"), context(agent, thread, trace)
    )
    assert (outcome.text, outcome.is_error) == ("quota", True)
    assert trace.spans[0].level is Level.ERROR


@pytest.mark.parametrize(
    ("gateway", "expected"),
    [
        (FakeGateway(tools=TOOLS, failure=McpConnectionFailed("connection refused")), "connection refused"),
        (FakeGateway(tools=TOOLS, result=OK), "integration 'memo' has no tool 'drop'"),
    ],
)
async def test_a_failed_mcp_tool_call_is_told_to_the_model(app: FakeApp, gateway: FakeGateway, expected: str) -> None:
    app.gateway = gateway
    _, integration, agent, thread = await setup(app)
    trace = RecordingTrace()
    outcome = await McpToolCall(execute(app))(
        call("memo__drop"), mcp_tool(integration, "drop"), context(agent, thread, trace)
    )
    assert (outcome.text, outcome.is_error) == (f"Tool call failed: {expected}", True)
    [span] = trace.spans
    assert span.level is Level.ERROR and span.ended is not None and span.ended["status_message"] == expected


async def test_an_mcp_tool_of_an_integration_id_that_is_no_uuid_is_not_found(app: FakeApp) -> None:
    _, _, agent, thread = await setup(app)
    outcome = await McpToolCall(execute(app))(
        call("memo__search"),
        mcp_tool("not-an-id", "search"),
        context(agent, thread, RecordingTrace()),
    )
    assert outcome.is_error and outcome.text == "Tool call failed: MCP integration not-an-id not found"


async def test_resource_retrieval_imports_into_the_runs_thread_and_names_the_sources(app: FakeApp) -> None:
    app.gateway = FakeGateway(contents=[McpResourceContent(uri="memo://1", mime_type="text/plain", text="Buy milk")])
    _, integration, agent, thread = await setup(app)
    trace = RecordingTrace()
    outcome = await McpResourceRetrieval(retrieve(app))(
        call(RETRIEVE_RESOURCE, {"integrationId": str(integration.id), "uri": "memo://1"}),
        Tool(name=RETRIEVE_RESOURCE, description="", parameters={}, type=ToolType.MCP_RESOURCE),
        context(agent, thread, trace),
    )
    [source] = app.store.sources.values()
    assert (source.thread_id, source.created_by) == (thread.id, CreatedBy.LLM)
    assert not outcome.is_error and outcome.data == {"source_ids": [str(source.id)]}
    assert outcome.text == (
        f"Imported resource memo://1 from integration {integration.id} into this thread as "
        f"'1' (source id {source.id}, text, text/plain, 8 bytes).\nPreview:\n1: Buy milk"
    )
    assert trace.spans[0].ended is not None and trace.spans[0].ended["metadata"] == {"sourceIds": [str(source.id)]}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"uri": "memo://1"}, "Resource retrieval failed: integrationId parameter is required"),
        ({"integrationId": "x"}, "Resource retrieval failed: uri parameter is required"),
        ({"integrationId": "x", "uri": "memo://1"}, "Resource retrieval failed: MCP integration x not found"),
    ],
)
async def test_resource_retrieval_tells_the_model_what_is_wrong(
    app: FakeApp, arguments: dict[str, str], expected: str
) -> None:
    _, _, agent, thread = await setup(app)
    outcome = await McpResourceRetrieval(retrieve(app))(
        call(RETRIEVE_RESOURCE, arguments),
        Tool(name=RETRIEVE_RESOURCE, description="", parameters={}, type=ToolType.MCP_RESOURCE),
        context(agent, thread, RecordingTrace()),
    )
    assert (outcome.text, outcome.is_error) == (expected, True)
    assert app.store.sources == {}
