"""The run's native tool handlers on fakes (searching sources, the web, commands, code), and how a run's
tools are assembled: which are offered, under which names, and what is skipped with a warning."""

from typing import Any

import pytest

from application.errors import McpConnectionFailed, ToolFailure
from application.ports.mcp import McpPromptInfo, McpResourceInfo, McpResourceTemplateInfo, McpToolInfo
from application.ports.native_tools import CommandSpec, ProcessOutput, SearchHit, WebPage
from application.ports.tracing import Level
from application.retrieval import PassageSearch
from application.runs.tools.assembly import RETRIEVE_PROMPT, RETRIEVE_RESOURCE, AssembledTools, tool_name
from application.runs.tools.handler import ToolContext, ToolHandler, ToolOutcome
from application.runs.tools.native import (
    SOURCE_QUERY_BUDGET,
    SOURCE_QUERY_PASSAGES,
    CodeExecution,
    InternetSearch,
    RunCommand,
    SourceQuery,
    WebsiteContent,
)
from domain.agents import Agent
from domain.ids import RunId, SourceId
from domain.integrations import FilterMode, ToolFilter
from domain.native_tools import NATIVE_TOOLS_BY_TYPE, ToolRef
from domain.organizations import Organization
from domain.runs import ClientTool
from domain.sources import CreatedBy, Source, SourceKind, SourceOrigin, TableData, passages_of
from domain.threads import Thread
from domain.tools import TOOL_NAME_MAX, Tool, ToolType
from tests.unit.fakes.app import FakeApp
from tests.unit.fakes.ports import NOW, Commands, FakeGateway, RecordingTrace, Sandbox, Search, WebPages, call


def native(kind: ToolType, **metadata: Any) -> Tool:
    spec = NATIVE_TOOLS_BY_TYPE[kind]
    return Tool(name=spec.name, description="", parameters=spec.parameters, type=kind, metadata=metadata)


def context(agent: Agent, thread: Thread, trace: RecordingTrace | None = None) -> ToolContext:
    return ToolContext(
        org_id=agent.org_id, run_id=RunId(thread.id), thread_id=thread.id, agent=agent, trace=trace or RecordingTrace()
    )


async def run(
    handler: ToolHandler, kind: ToolType, arguments: dict[str, Any], agent: Agent, thread: Thread, **metadata: Any
) -> ToolOutcome:
    return await handler(call(kind.value, arguments), native(kind, **metadata), context(agent, thread))


async def an_agent_and_thread(app: FakeApp) -> tuple[Organization, Agent, Thread]:
    org = await app.organization()
    agent = await app.agent(org)
    return org, agent, await app.thread(agent)


async def add_source(
    app: FakeApp,
    agent: Agent,
    *,
    thread: Thread | None = None,
    text: str | None = None,
    name: str = "notes",
    data: TableData | None = None,
) -> Source:
    kind = SourceKind.TEXT if text is not None else SourceKind.DATA if data is not None else SourceKind.BLOB
    source = Source(
        id=SourceId(app.ids.new()),
        org_id=agent.org_id,
        kind=kind,
        name=name,
        origin=SourceOrigin(type="upload"),
        mime_type=None,
        size=1,
        created_by=CreatedBy.USER,
        created_at=NOW,
        thread_id=thread.id if thread else None,
        agent_id=None if thread else agent.id,
        text=text,
        data=data,
        blob=b"\x00" if kind is SourceKind.BLOB else None,
    )
    async with app.uow as uow:
        await uow.sources.add(source)
        await uow.passages.replace(source, passages_of(source))
        await uow.commit()
    return source


# -- SourceQuery -------------------------------------------------------------------------------------------


async def test_a_source_query_finds_passages_in_the_threads_and_the_agents_sources() -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    in_thread = await add_source(
        app, agent, thread=thread, text="# Billing\n\nThe invoice is due on Friday.", name="mail"
    )
    of_agent = await add_source(
        app, agent, data=TableData(headers=("customer", "invoice"), rows=(("acme", "42"),)), name="table"
    )
    await add_source(app, agent, thread=await app.thread(agent), text="another invoice elsewhere")
    await add_source(app, agent, thread=thread)  # a blob: never read
    outcome = await run(
        SourceQuery(PassageSearch(app.uow, None)), ToolType.SOURCE_QUERY, {"query": "invoice due"}, agent, thread
    )
    assert not outcome.is_error
    assert outcome.text == (
        f"[1] mail — Billing (source_id {in_thread.id}, passage 0)\nThe invoice is due on Friday.\n\n"
        f"[2] table — row 1 (source_id {of_agent.id}, passage 0)\ncustomer: acme; invoice: 42"
    )


async def test_a_source_query_may_search_one_source_only() -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    await add_source(app, agent, thread=thread, text="apples", name="first")
    second = await add_source(app, agent, thread=thread, text="apples and pears", name="second")
    arguments = {"query": "apples", "source_id": str(second.id)}
    outcome = await run(SourceQuery(PassageSearch(app.uow, None)), ToolType.SOURCE_QUERY, arguments, agent, thread)
    assert outcome.text == f"[1] second — passage 1 (source_id {second.id}, passage 0)\napples and pears"


async def test_a_source_query_keeps_to_its_character_budget() -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    paragraphs = "\n\n".join(f"needle {n} " + "filler " * 130 for n in range(12))
    await add_source(app, agent, thread=thread, text=paragraphs)
    outcome = await run(
        SourceQuery(PassageSearch(app.uow, None)), ToolType.SOURCE_QUERY, {"query": "needle"}, agent, thread
    )
    assert SOURCE_QUERY_BUDGET - 200 <= len(outcome.text) <= SOURCE_QUERY_BUDGET
    assert outcome.text.count("[") == outcome.text.count("(source_id") <= SOURCE_QUERY_PASSAGES
    assert outcome.text.endswith("…")


async def test_the_trace_shows_the_query_and_the_passages_returned() -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    source = await add_source(app, agent, thread=thread, text="apples and pears", name="fruit")
    trace = RecordingTrace()
    await SourceQuery(PassageSearch(app.uow, None))(
        call("source_query", {"query": "pears"}), native(ToolType.SOURCE_QUERY), context(agent, thread, trace)
    )
    [span] = trace.spans
    assert (span.name, span.input) == ("source_query", {"query": "pears", "source_id": None})
    assert span.ended is not None and span.ended["output"]["passages"] == [
        {"source_id": str(source.id), "source_name": "fruit", "position": 0, "location": "passage 1", "score": 1}
    ]


async def test_a_source_query_says_when_nothing_matches() -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    empty = await run(SourceQuery(PassageSearch(app.uow, None)), ToolType.SOURCE_QUERY, {"query": "x"}, agent, thread)
    assert empty.text == "No passage of this thread's sources matches 'x'." and not empty.is_error
    fruit = await add_source(app, agent, thread=thread, text="apples", name="fruit")
    missed = await run(
        SourceQuery(PassageSearch(app.uow, None)),
        ToolType.SOURCE_QUERY,
        {"query": "pears", "source_id": str(fruit.id)},
        agent,
        thread,
    )
    assert missed.text == f"No passage of source {fruit.id} matches 'pears'."


async def test_a_source_query_does_not_read_another_organizations_sources() -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    _, their_agent, their_thread = await an_agent_and_thread(app)
    await add_source(app, their_agent, thread=their_thread, text="secret plans")
    foreign = ToolContext(
        org_id=agent.org_id, run_id=RunId(thread.id), thread_id=their_thread.id, agent=agent, trace=RecordingTrace()
    )
    outcome = await SourceQuery(PassageSearch(app.uow, None))(
        call("source_query", {"query": "secret"}), native(ToolType.SOURCE_QUERY), foreign
    )
    assert outcome.text == "No passage of this thread's sources matches 'secret'."


@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        ({"query": "  "}, "Source query failed: query parameter is required"),
        ({"query": "x", "source_id": "nope"}, "Source query failed: 'nope' is not a source id"),
    ],
)
async def test_a_source_query_without_a_query_is_an_error_for_the_model(arguments: dict[str, Any], text: str) -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    outcome = await run(SourceQuery(PassageSearch(app.uow, None)), ToolType.SOURCE_QUERY, arguments, agent, thread)
    assert (outcome.text, outcome.is_error) == (text, True)


# -- WebsiteContent, InternetSearch, RunCommand, CodeExecution ------------------------------------------------------


async def test_a_web_page_is_read_with_its_title() -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    pages = WebPages({"https://example.com/": WebPage(url="https://example.com/", title="Example", text="Hello")})
    outcome = await run(WebsiteContent(pages), ToolType.WEBSITE_CONTENT, {"url": "https://example.com/"}, agent, thread)
    assert (outcome.text, outcome.is_error) == ("Title: Example\nURL: https://example.com/\n\nHello", False)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "Fetching the page failed: url parameter is required"),
        ({"url": "https://gone.example/"}, "Fetching the page failed: https://gone.example/ could not be fetched"),
    ],
)
async def test_a_page_that_cannot_be_read_is_told_to_the_model(arguments: dict[str, str], expected: str) -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    trace = RecordingTrace()
    outcome = await WebsiteContent(WebPages())(
        call("website_content", arguments), native(ToolType.WEBSITE_CONTENT), context(agent, thread, trace)
    )
    assert (outcome.text, outcome.is_error) == (expected, True)
    [span] = trace.spans
    assert (span.name, span.level) == ("website_content", Level.ERROR)


async def test_search_results_are_numbered() -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    search = Search(
        SearchHit(title="One", url="https://1.example", snippet="first"),
        SearchHit(title="Two", url="https://2.example", snippet="second"),
    )
    outcome = await run(InternetSearch(search), ToolType.INTERNET_SEARCH, {"query": " threadline "}, agent, thread)
    assert outcome.text == "1. One\nhttps://1.example\nfirst\n\n2. Two\nhttps://2.example\nsecond"
    assert search.queries == ["threadline"]


async def test_a_search_without_results_or_query_or_provider_is_told_to_the_model() -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    nothing = await run(InternetSearch(Search()), ToolType.INTERNET_SEARCH, {"query": "zzz"}, agent, thread)
    assert (nothing.text, nothing.is_error) == ("No results for 'zzz'.", False)
    no_query = await run(InternetSearch(Search()), ToolType.INTERNET_SEARCH, {}, agent, thread)
    assert (no_query.text, no_query.is_error) == ("Search failed: query parameter is required", True)
    failing = Search(failure=ToolFailure("the search provider answered 429"))
    failed = await run(InternetSearch(failing), ToolType.INTERNET_SEARCH, {"query": "x"}, agent, thread)
    assert (failed.text, failed.is_error) == ("Search failed: the search provider answered 429", True)


async def test_a_command_runs_with_the_models_arguments_and_its_exit_code_is_told() -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    commands = Commands(CommandSpec(name="deploy", description="Deploy"))
    outcome = await run(
        RunCommand(commands), ToolType.COMMAND, {"arguments": ["staging", 2]}, agent, thread, command="deploy"
    )
    assert commands.runs == [("deploy", ["staging", "2"])]
    assert (outcome.text, outcome.is_error) == ("done\n[exit code 0]", False)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (ProcessOutput(output="boom", exit_code=1), "boom\n[exit code 1]"),
        (ProcessOutput(output="", exit_code=None, timed_out=True), "[no output; stopped: it took too long]"),
    ],
)
async def test_a_command_that_fails_or_times_out_is_an_error(output: ProcessOutput, expected: str) -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    commands = Commands(CommandSpec(name="deploy", description="Deploy"), output=output)
    outcome = await run(RunCommand(commands), ToolType.COMMAND, {}, agent, thread, command="deploy")
    assert (outcome.text, outcome.is_error) == (expected, True)


async def test_command_arguments_that_are_not_a_list_of_strings_are_refused() -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    commands = Commands(CommandSpec(name="deploy", description="Deploy"))
    outcome = await run(
        RunCommand(commands), ToolType.COMMAND, {"arguments": "--force"}, agent, thread, command="deploy"
    )
    assert (outcome.text, outcome.is_error) == ("Command failed: arguments must be a list of strings", True)
    assert commands.runs == []


async def test_code_runs_in_the_sandbox_and_empty_code_is_refused() -> None:
    app = FakeApp()
    _, agent, thread = await an_agent_and_thread(app)
    sandbox = Sandbox()
    outcome = await run(CodeExecution(sandbox), ToolType.CODE_EXECUTION, {"code": "print(6*7)"}, agent, thread)
    assert (outcome.text, outcome.is_error, sandbox.programs) == ("42\n[exit code 0]", False, ["print(6*7)"])
    empty = await run(CodeExecution(sandbox), ToolType.CODE_EXECUTION, {"code": " "}, agent, thread)
    assert (empty.text, empty.is_error) == ("Code execution failed: code parameter is required", True)
    assert sandbox.programs == ["print(6*7)"]


# -- ToolAssembler ------------------------------------------------------------------------------------------------


async def assemble(app: FakeApp, agent: Agent, client_tools: tuple[ClientTool, ...] = ()) -> AssembledTools:
    return await app.assembler().assemble(agent, client_tools)


async def test_native_tools_are_offered_unless_the_server_cannot_run_them() -> None:
    app = FakeApp(commands=Commands(CommandSpec(name="deploy", description="Deploy the app")))
    org = await app.organization()
    agent = await app.agent(
        org,
        tools=(
            ToolRef(type=ToolType.SOURCE_QUERY),
            ToolRef(type=ToolType.SEND_EMAIL),
            ToolRef(type=ToolType.COMMAND, config={"name": "deploy"}),
            ToolRef(type=ToolType.COMMAND, config={"name": "rm"}),
            ToolRef(type=ToolType.INTERNET_SEARCH),
            ToolRef(type=ToolType.CODE_EXECUTION),
        ),
    )
    assembled = await assemble(app, agent)
    assert assembled.names == ["source_query", "send_email", "command__deploy"]
    assert assembled.warnings == (
        "command 'rm' is not defined by the operator; it was skipped",
        "internet_search is not configured on this server; it was skipped",
        "code_execution is not enabled on this server; it was skipped",
    )
    command = assembled.get("command__deploy")
    assert command is not None and command.description == "Deploy the app" and command.metadata == {"command": "deploy"}
    assert assembled.waits_for_client("send_email") and not assembled.waits_for_client("source_query")
    assert assembled.type_of("nope") == "unknown" and assembled.type_of("send_email") == "send_email"


async def test_sub_agents_are_offered_and_one_that_was_deleted_is_a_warning() -> None:
    app = FakeApp()
    org = await app.organization()
    helper = await app.agent(org, name="Researcher", slug="researcher", description="Finds facts")
    lead = await app.agent(org, sub_agent_ids=(helper.id,))
    app.store.agents.pop(helper.id)
    assert (await assemble(app, lead)).warnings == ("a sub-agent of this agent no longer exists",)
    app.store.agents[helper.id] = helper
    assembled = await assemble(app, lead)
    [tool] = assembled.tools
    assert (tool.name, tool.type, tool.metadata) == ("agent__researcher", ToolType.AGENT, {"agent_id": str(helper.id)})
    assert "'Researcher': Finds facts" in tool.description


async def test_mcp_tools_are_named_after_their_integration_and_filtered() -> None:
    tools = [
        McpToolInfo(name="search", description="Search", input_schema={"type": "object"}),
        McpToolInfo(name="purge", description="", title="Purge all", input_schema={"type": "object"}),
        McpToolInfo(name="hidden", description="", input_schema={"type": "object"}),
    ]
    app = FakeApp(gateway=FakeGateway(tools=tools))
    org = await app.organization()
    integration = await app.integration(
        org, slug="memo", tool_filter=ToolFilter(mode=FilterMode.EXCLUDE, names=("hidden",))
    )
    agent = await app.agent(org, mcp_integration_ids=(integration.id,))
    assembled = await assemble(app, agent)
    assert assembled.names == [RETRIEVE_PROMPT, RETRIEVE_RESOURCE, "memo__search", "memo__purge"]
    purge = assembled.get("memo__purge")
    assert purge is not None and purge.description == "Purge all"
    assert purge.metadata == {"integration_id": str(integration.id), "tool_name": "purge"}


async def test_the_retrieval_tools_list_each_integrations_prompts_and_resources() -> None:
    app = FakeApp(
        gateway=FakeGateway(
            prompts=[McpPromptInfo(name="greet")],
            resources=[McpResourceInfo(uri="memo://1", name="First")],
            templates=[McpResourceTemplateInfo(uri_template="memo://{id}", name="Memo")],
        )
    )
    org = await app.organization()
    integration = await app.integration(org, name="Memos")
    assembled = await assemble(app, await app.agent(org, mcp_integration_ids=(integration.id,)))
    prompt, resource = assembled.get(RETRIEVE_PROMPT), assembled.get(RETRIEVE_RESOURCE)
    assert prompt is not None and resource is not None
    assert prompt.description.endswith(f"Integrations and their prompts:\n- {integration.id} (Memos): greet")
    assert resource.description.endswith(
        f"Integrations and their resources:\n- {integration.id} (Memos): "
        "memo://1 (First), memo://{id} (template: Memo)"
    )


async def test_disabled_missing_and_unreachable_integrations_are_skipped_with_warnings() -> None:
    app = FakeApp(gateway=FakeGateway(failure=McpConnectionFailed("connection refused")))
    org = await app.organization()
    disabled = await app.integration(org, slug="off", enabled=False)
    down = await app.integration(org, slug="down")
    gone = await app.integration(org, slug="gone")
    agent = await app.agent(org, mcp_integration_ids=(disabled.id, down.id, gone.id))
    app.store.integrations.pop(gone.id)
    assembled = await assemble(app, agent)
    assert assembled.names == [RETRIEVE_PROMPT, RETRIEVE_RESOURCE]
    assert set(assembled.warnings) == {
        f"MCP integration {gone.id} no longer exists; it was skipped",
        "MCP integration 'off' is disabled; its tools are not offered",
        "MCP integration 'down' was skipped: connection refused",
    }
    assert {t.integration_id for t in app.gateway.targets} == {down.id}


async def test_an_mcp_tool_whose_name_is_taken_gets_a_numbered_suffix() -> None:
    app = FakeApp(gateway=FakeGateway(tools=[McpToolInfo(name="ask", description="", input_schema={})]))
    org = await app.organization()
    integration = await app.integration(org, slug="memo")
    agent = await app.agent(org, mcp_integration_ids=(integration.id,))
    client = ClientTool(name="memo__ask", description="The client's own", parameters={"type": "object"})
    assembled = await assemble(app, agent, (client,))
    assert assembled.names == ["memo__ask", RETRIEVE_PROMPT, RETRIEVE_RESOURCE, "memo__ask_2"]
    mcp = assembled.get("memo__ask_2")
    own = assembled.get("memo__ask")
    assert mcp is not None and mcp.type is ToolType.MCP_TOOL
    assert own is not None and own.type is ToolType.CLIENT and assembled.waits_for_client("memo__ask")


def test_tool_names_are_made_acceptable_to_models() -> None:
    assert tool_name("memo__read file.txt") == "memo__read_file_txt"
    assert tool_name("") == "tool"
    assert len(tool_name("x" * 100)) == TOOL_NAME_MAX
