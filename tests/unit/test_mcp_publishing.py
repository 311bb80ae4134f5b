"""What an organization publishes over MCP, on fakes: its published agents and its prompt templates, each
as a tool (answered by a real run) and as a prompt, and the completion of template arguments."""

import logging

import pytest

from application.errors import ModelUnavailable, PublishedNotFound
from application.ports.template_files import FileTemplate
from application.use_cases.mcp_publishing import (
    AGENT_INPUT_SCHEMA,
    CallPublishedTool,
    CompleteArgument,
    GetPublishedPrompt,
    ListPublished,
    ToolCall,
    agent_description,
)
from domain.agents import Agent
from domain.mcp_prompts import PromptMessage, PromptResult
from domain.organizations import Organization
from domain.prompt_templates import ArgumentType, PromptTemplate, TemplateArgument, TemplateMessage
from domain.runs import RunStatus
from tests import builders
from tests.unit.fakes.app import FakeApp, member
from tests.unit.fakes.ports import NOW, TemplateFiles, answer

TOPIC = TemplateArgument(name="topic", required=True, description="What to write about", remember=True)
TAGS = TemplateArgument(name="tags", type=ArgumentType.ARRAY)
BRIEF = PromptTemplate(
    name="write-brief",
    description="Write a brief.",
    messages=(
        TemplateMessage(role="system", content="Be concise."),
        TemplateMessage(role="user", content="A brief on {topic}, tagged {tags}"),
    ),
    arguments=(TOPIC, TAGS),
    origin="prompts/write-brief.yaml",
)


@pytest.fixture
def app() -> FakeApp:
    return FakeApp()


async def published_org(app: FakeApp) -> tuple[Organization, Agent]:
    """An organization with a published agent `writer`, which also answers the file template `write-brief`."""
    org = await app.organization()
    writer = await app.agent(org, slug="writer", publish_as_mcp=True, description="Writes things")
    app.files = TemplateFiles(org.id, FileTemplate(template=BRIEF, agent_slug="writer"))
    return org, writer


def call_tool(app: FakeApp) -> CallPublishedTool:
    return CallPublishedTool(app.uow, app.clock, app.files, app.ask_agent())


# -- ListPublished ------------------------------------------------------------------------------------------


async def test_published_agents_and_templates_are_tools_and_prompts(app: FakeApp) -> None:
    org, _ = await published_org(app)
    await app.agent(org, slug="private")
    published = await ListPublished(app.uow, app.files).execute(member(org))
    assert [(t.name, t.description) for t in published.tools] == [
        ("writer", "Writes things"),
        ("write_brief", "Write a brief."),
    ]
    assert published.tools[0].input_schema == AGENT_INPUT_SCHEMA
    assert published.tools[1].input_schema == {
        "type": "object",
        "properties": {
            "topic": {"type": "string", "description": "What to write about"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["topic"],
    }
    agent_prompt, template_prompt = published.prompts
    assert (agent_prompt.name, agent_prompt.arguments) == ("writer", ())
    assert template_prompt.name == "write-brief"
    assert [(a.name, a.required) for a in template_prompt.arguments] == [("topic", True), ("tags", False)]


async def test_another_organization_publishes_nothing_of_this_one(app: FakeApp) -> None:
    await published_org(app)
    other = await app.organization()
    published = await ListPublished(app.uow, app.files).execute(member(other))
    assert (published.tools, published.prompts) == ([], [])


async def test_a_template_whose_name_an_agent_takes_is_hidden_with_a_warning(
    app: FakeApp, caplog: pytest.LogCaptureFixture
) -> None:
    org, _ = await published_org(app)
    await app.agent(org, slug="write-brief", publish_as_mcp=True)
    with caplog.at_level(logging.WARNING):
        published = await ListPublished(app.uow, app.files).execute(member(org))
    assert [t.name for t in published.tools] == ["write-brief", "writer"]
    assert all(t.input_schema == AGENT_INPUT_SCHEMA for t in published.tools)
    assert "prompt template hidden" in caplog.text


@pytest.mark.parametrize(
    ("description", "instructions", "expected"),
    [
        ("Writes things", "Ignored.", "Writes things"),
        ("", "You write briefs. Keep them short.\nMore.", "You write briefs."),
        ("", "Summarize tickets", "Summarize tickets."),
        ("", "", ""),
    ],
)
def test_an_agent_is_described_by_its_description_or_its_first_sentence(
    description: str, instructions: str, expected: str
) -> None:
    agent = builders.agent(builders.organization().id, description=description, instructions=instructions)
    assert agent_description(agent) == expected


# -- CallPublishedTool ----------------------------------------------------------------------------------------


async def test_a_published_agent_answers_its_input_in_a_run_of_its_own(app: FakeApp) -> None:
    org, writer = await published_org(app)
    app.model.then(answer("Here is the text."))
    progress: list[str] = []

    async def report(_: float, message: str) -> None:
        progress.append(message)

    answered = await call_tool(app).execute(
        ToolCall(caller=member(org), name="writer", arguments={"input": "Write a haiku"}, progress=report)
    )
    assert (answered.text, answered.is_error) == ("Here is the text.", False)
    assert answered.run is not None and answered.run.status is RunStatus.COMPLETED
    assert answered.run.agent_id == writer.id
    assert app.store.threads[answered.run.thread_id].title == "MCP call of writer"
    assert app.model.requests[0].messages[-1].text == "Write a haiku"
    assert progress == ["Starting agent", "Completed"]


@pytest.mark.parametrize("arguments", [{}, {"input": "  "}, {"input": 3}])
async def test_a_published_agent_without_input_is_an_error_answer(app: FakeApp, arguments: dict[str, object]) -> None:
    org, _ = await published_org(app)
    answered = await call_tool(app).execute(ToolCall(caller=member(org), name="writer", arguments=arguments))
    assert (answered.text, answered.is_error, answered.run) == (
        "input is required: the task for the agent, as text",
        True,
        None,
    )
    assert app.store.runs == {}


async def test_a_run_that_fails_is_an_error_answer(app: FakeApp) -> None:
    org, _ = await published_org(app)
    app.model.then(ModelUnavailable("the provider is down"))
    answered = await call_tool(app).execute(ToolCall(caller=member(org), name="writer", arguments={"input": "Go"}))
    assert (answered.text, answered.is_error) == ("the provider is down", True)
    assert answered.run is not None and answered.run.status is RunStatus.FAILED


async def test_an_unpublished_agent_or_another_organizations_tool_is_not_found(app: FakeApp) -> None:
    org, _ = await published_org(app)
    await app.agent(org, slug="private")
    other = await app.organization()
    with pytest.raises(PublishedNotFound):
        await call_tool(app).execute(ToolCall(caller=member(org), name="private", arguments={"input": "x"}))
    with pytest.raises(PublishedNotFound):
        await call_tool(app).execute(ToolCall(caller=member(other), name="writer", arguments={"input": "x"}))
    assert app.store.runs == {}


async def test_a_template_is_rendered_and_answered_by_its_agent(app: FakeApp) -> None:
    org, writer = await published_org(app)
    app.model.then(answer("A brief."))
    answered = await call_tool(app).execute(
        ToolCall(caller=member(org), name="write_brief", arguments={"topic": "tides", "tags": ["sea", 2], "x": 1})
    )
    assert (answered.text, answered.is_error) == ("A brief.", False)
    assert answered.run is not None and answered.run.agent_id == writer.id
    assert app.model.requests[0].messages[-1].text == "System: Be concise.\n\nA brief on tides, tagged sea, 2"
    assert app.store.threads[answered.run.thread_id].title == "Prompt template write-brief"
    assert list(app.store.argument_values) == [(org.id, "write-brief", "topic", "tides")]


async def test_a_stored_template_is_answered_by_the_agent_it_names(app: FakeApp) -> None:
    org = await app.organization()
    agent = await app.agent(org)
    template = builders.prompt_template(
        org.id, name="summarize", agent_id=agent.id, arguments=(TemplateArgument(name="text"),)
    )
    app.store.templates[(org.id, template.name)] = template
    app.model.then(answer("Short."))
    answered = await call_tool(app).execute(
        ToolCall(caller=member(org), name="summarize", arguments={"text": "a long memo"})
    )
    assert answered.text == "Short." and answered.run is not None and answered.run.agent_id == agent.id
    assert app.model.requests[0].messages[-1].text == "Summarize a long memo"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"tags": ["a"]}, "missing required arguments: topic"),
        ({"topic": ["a", "list"]}, "argument 'topic' must be a string"),
        ({"topic": "t", "tags": {"a": 1}}, "argument 'tags' must be a list of strings"),
    ],
)
async def test_template_arguments_that_do_not_fit_are_an_error_answer(
    app: FakeApp, arguments: dict[str, object], expected: str
) -> None:
    org, _ = await published_org(app)
    answered = await call_tool(app).execute(ToolCall(caller=member(org), name="write_brief", arguments=arguments))
    assert (answered.text, answered.is_error) == (expected, True)
    assert app.store.runs == {} and app.store.argument_values == {}


async def test_a_single_value_of_a_list_argument_is_a_list_of_one(app: FakeApp) -> None:
    org, _ = await published_org(app)
    app.model.then(answer("A brief."))
    await call_tool(app).execute(
        ToolCall(caller=member(org), name="write_brief", arguments={"topic": "tides", "tags": "sea"})
    )
    assert app.model.requests[0].messages[-1].text.endswith("A brief on tides, tagged sea")


@pytest.mark.parametrize("agent_slug", ["nobody", None])
async def test_a_template_without_an_agent_is_an_error_answer(app: FakeApp, agent_slug: str | None) -> None:
    org = await app.organization()
    app.files = TemplateFiles(org.id, FileTemplate(template=BRIEF, agent_slug=agent_slug))
    answered = await call_tool(app).execute(ToolCall(caller=member(org), name="write_brief", arguments={"topic": "t"}))
    assert (answered.text, answered.is_error) == ("template 'write-brief' has no agent to answer it", True)
    assert app.store.runs == {}


# -- GetPublishedPrompt --------------------------------------------------------------------------------------------


async def test_an_agents_prompt_is_its_instructions(app: FakeApp) -> None:
    org = await app.organization()
    await app.agent(org, slug="coach", name="Coach", publish_as_mcp=True, instructions="Encourage people.")
    await app.agent(org, slug="silent", name="Silent", publish_as_mcp=True)
    get = GetPublishedPrompt(app.uow, app.files)
    assert await get.execute(member(org), "coach", {}) == PromptResult(
        description="Encourage people.", messages=(PromptMessage(role="user", content="Encourage people."),)
    )
    silent = await get.execute(member(org), "silent", {})
    assert silent.messages == (PromptMessage(role="user", content="You are Silent."),)


async def test_a_templates_prompt_says_how_to_call_its_tool(app: FakeApp) -> None:
    org, _ = await published_org(app)
    result = await GetPublishedPrompt(app.uow, app.files).execute(member(org), "write-brief", {"topic": "tides"})
    assert result.description == "Write a brief."
    assert result.messages == (
        PromptMessage(
            role="user",
            content="Use the write_brief tool to write a brief\n\nCall it with the following arguments:\n"
            "  - topic: tides\n  - tags: <optional, not provided>",
        ),
    )


async def test_an_unknown_prompt_is_not_found(app: FakeApp) -> None:
    org, _ = await published_org(app)
    with pytest.raises(PublishedNotFound):
        await GetPublishedPrompt(app.uow, app.files).execute(member(org), "write_brief", {})


# -- CompleteArgument ------------------------------------------------------------------------------------------------


async def test_completions_are_the_listed_values_then_those_used_before_matching_what_was_typed(app: FakeApp) -> None:
    org = await app.organization()
    topic = TemplateArgument(name="topic", autocomplete=("Tides", "Trade", "Wind"), remember=True)
    template = PromptTemplate(
        name="write-brief",
        description="",
        messages=(TemplateMessage(role="user", content="{topic}"),),
        arguments=(topic, TemplateArgument(name="tone")),
    )
    app.files = TemplateFiles(org.id, FileTemplate(template=template, agent_slug=None))
    for value, minutes in (("tides", 1), ("trains", 2), ("Tides", 3), ("wind", 4)):
        async with app.uow as uow:
            await uow.argument_values.remember(org.id, "write-brief", "topic", [value], NOW.replace(minute=minutes))
            await uow.commit()
    complete = CompleteArgument(app.uow, app.files)
    assert await complete.execute(member(org), "write-brief", "topic", "t") == ["Tides", "Trade", "trains", "tides"]
    assert await complete.execute(member(org), "write-brief", "tone", "") == []
    assert await complete.execute(member(org), "missing", "topic", "") == []
    other = await app.organization()
    assert await complete.execute(member(other), "write-brief", "topic", "t") == []
