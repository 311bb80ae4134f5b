"""Prompt templates over the API on fakes: admins manage the organization's own, those of the prompts
directory are read-only, and every template's MCP names must be its own."""

from datetime import timedelta

import pytest

from application.caller import Caller
from application.errors import Conflict, InvalidReference, PermissionDenied, PromptTemplateNotFound, SlugTaken
from application.ports.template_files import FileTemplate
from application.use_cases.prompt_templates import (
    CreatePromptTemplate,
    DeletePromptTemplate,
    GetPromptTemplate,
    ListPromptTemplates,
    RenderCommand,
    RenderPromptTemplate,
    SaveTemplateCommand,
    TemplateChanges,
    UpdatePromptTemplate,
)
from domain.agents import Agent
from domain.errors import InvalidValue
from domain.ids import AgentId
from domain.mcp_prompts import PromptMessage
from domain.organizations import Organization
from domain.prompt_templates import MissingArguments, PromptTemplate, TemplateArgument, TemplateMessage
from tests import builders
from tests.unit.fakes.app import FakeApp, admin, member
from tests.unit.fakes.ports import NOW, TemplateFiles

MESSAGES = (TemplateMessage(role="user", content="Summarize {text}"),)
TEXT = TemplateArgument(name="text", required=True)


@pytest.fixture
def app() -> FakeApp:
    return FakeApp()


async def org_with_agent(app: FakeApp) -> tuple[Organization, Agent]:
    org = await app.organization()
    return org, await app.agent(org, slug="writer")


def from_file(app: FakeApp, org: Organization, name: str, agent_slug: str | None = "writer") -> PromptTemplate:
    template = builders.prompt_template(None, name=name, origin=f"prompts/{name}.yaml")
    app.files = TemplateFiles(org.id, *app.files.templates, FileTemplate(template=template, agent_slug=agent_slug))
    return template


def save(
    agent: Agent,
    name: str = "summarize",
    *,
    caller: Caller | None = None,
    arguments: tuple[TemplateArgument, ...] = (TEXT,),
    agent_id: AgentId | None = None,
) -> SaveTemplateCommand:
    return SaveTemplateCommand(
        caller=caller or admin(agent.org_id),
        name=name,
        description="Summarize a text",
        messages=MESSAGES,
        arguments=arguments,
        agent_id=agent_id or agent.id,
    )


def create(app: FakeApp) -> CreatePromptTemplate:
    return CreatePromptTemplate(app.uow, app.clock, app.files)


def update(app: FakeApp) -> UpdatePromptTemplate:
    return UpdatePromptTemplate(app.uow, app.clock, app.files)


async def stored(app: FakeApp, org: Organization, name: str) -> PromptTemplate | None:
    async with app.uow.read_only() as uow:
        return await uow.prompt_templates.get(org.id, name)


# -- CreatePromptTemplate ---------------------------------------------------------------------------------


async def test_an_admin_creates_a_template_answered_by_an_agent(app: FakeApp) -> None:
    org, agent = await org_with_agent(app)
    created = await create(app).execute(save(agent))
    assert (created.org_id, created.name, created.agent_id, created.origin) == (org.id, "summarize", agent.id, "api")
    assert (created.created_at, created.updated_at) == (NOW, NOW)
    assert await stored(app, org, "summarize") == created


async def test_a_member_may_not_create_a_template(app: FakeApp) -> None:
    org, agent = await org_with_agent(app)
    with pytest.raises(PermissionDenied):
        await create(app).execute(save(agent, caller=member(org)))
    assert app.store.templates == {}


async def test_a_template_answered_by_another_organizations_agent_is_refused(app: FakeApp) -> None:
    org, _ = await org_with_agent(app)
    _, theirs = await org_with_agent(app)
    mine = await app.agent(org)
    with pytest.raises(InvalidReference):
        await create(app).execute(save(mine, agent_id=theirs.id))
    assert app.store.templates == {}


async def test_a_name_already_used_is_refused(app: FakeApp) -> None:
    _org, agent = await org_with_agent(app)
    await create(app).execute(save(agent))
    with pytest.raises(SlugTaken):
        await create(app).execute(save(agent))
    assert len(app.store.templates) == 1


async def test_a_template_whose_tool_name_another_template_publishes_is_refused(app: FakeApp) -> None:
    org, agent = await org_with_agent(app)
    await create(app).execute(save(agent, "weekly-report"))
    with pytest.raises(Conflict, match="another template already publishes 'weekly_report'"):
        await create(app).execute(save(agent, "weekly_report"))
    assert await stored(app, org, "weekly_report") is None


async def test_a_name_the_prompts_directory_publishes_is_refused(app: FakeApp) -> None:
    org, agent = await org_with_agent(app)
    from_file(app, org, "review")
    with pytest.raises(Conflict, match="the prompts directory already publishes 'review'"):
        await create(app).execute(save(agent, "review"))


async def test_a_name_an_agent_publishes_over_mcp_is_refused(app: FakeApp) -> None:
    _org, agent = await org_with_agent(app)
    with pytest.raises(Conflict, match="collides with the agent slug 'writer'"):
        await create(app).execute(save(agent, "writer"))


async def test_an_invalid_template_is_refused(app: FakeApp) -> None:
    _, agent = await org_with_agent(app)
    with pytest.raises(InvalidValue):
        await create(app).execute(save(agent, "has spaces"))
    with pytest.raises(InvalidValue, match="unique"):
        await create(app).execute(save(agent, arguments=(TEXT, TEXT)))
    assert app.store.templates == {}


# -- UpdatePromptTemplate, DeletePromptTemplate -------------------------------------------------------------------


async def test_an_update_changes_the_given_fields_and_may_rename(app: FakeApp) -> None:
    org, agent = await org_with_agent(app)
    other = await app.agent(org)
    await create(app).execute(save(agent))
    app.clock.advance(60)
    changes = TemplateChanges(name="digest", description="Digest a text", agent_id=other.id)
    updated = await update(app).execute(admin(org), "summarize", changes)
    assert await stored(app, org, "summarize") is None
    assert await stored(app, org, "digest") == updated
    assert (updated.description, updated.agent_id, updated.messages) == ("Digest a text", other.id, MESSAGES)
    assert (updated.created_at, updated.updated_at) == (NOW, NOW + timedelta(seconds=60))


async def test_an_update_may_keep_its_own_name(app: FakeApp) -> None:
    org, agent = await org_with_agent(app)
    await create(app).execute(save(agent))
    messages = [TemplateMessage(role="system", content="Be short."), *MESSAGES]
    updated = await update(app).execute(admin(org), "summarize", TemplateChanges(messages=messages))
    assert updated.messages == tuple(messages) and await stored(app, org, "summarize") == updated


async def test_an_update_is_refused_for_members_and_for_bad_references(app: FakeApp) -> None:
    org, agent = await org_with_agent(app)
    _, theirs = await org_with_agent(app)
    created = await create(app).execute(save(agent))
    with pytest.raises(PermissionDenied):
        await update(app).execute(member(org), "summarize", TemplateChanges(description="x"))
    with pytest.raises(InvalidReference):
        await update(app).execute(admin(org), "summarize", TemplateChanges(agent_id=theirs.id))
    with pytest.raises(Conflict):
        await update(app).execute(admin(org), "summarize", TemplateChanges(name="writer"))
    assert await stored(app, org, "summarize") == created


async def test_a_template_of_the_prompts_directory_is_changed_in_its_file_only(app: FakeApp) -> None:
    org, _ = await org_with_agent(app)
    from_file(app, org, "review")
    with pytest.raises(Conflict, match="change its file"):
        await update(app).execute(admin(org), "review", TemplateChanges(description="x"))
    with pytest.raises(Conflict, match="delete its file"):
        await DeletePromptTemplate(app.uow, app.clock, app.files).execute(admin(org), "review")


async def test_another_organizations_template_is_not_found(app: FakeApp) -> None:
    org, agent = await org_with_agent(app)
    other, _ = await org_with_agent(app)
    await create(app).execute(save(agent))
    with pytest.raises(PromptTemplateNotFound):
        await update(app).execute(admin(other), "summarize", TemplateChanges(description="x"))
    with pytest.raises(PromptTemplateNotFound):
        await DeletePromptTemplate(app.uow, app.clock, app.files).execute(admin(other), "summarize")
    with pytest.raises(PromptTemplateNotFound):
        await GetPromptTemplate(app.uow, app.files).execute(member(other), "summarize")
    assert await stored(app, org, "summarize") is not None


async def test_an_admin_deletes_a_template(app: FakeApp) -> None:
    org, agent = await org_with_agent(app)
    await create(app).execute(save(agent))
    with pytest.raises(PermissionDenied):
        await DeletePromptTemplate(app.uow, app.clock, app.files).execute(member(org), "summarize")
    await DeletePromptTemplate(app.uow, app.clock, app.files).execute(admin(org), "summarize")
    assert app.store.templates == {}


# -- ListPromptTemplates, GetPromptTemplate, RenderPromptTemplate ----------------------------------------------------


async def test_stored_and_file_templates_are_listed_by_name_a_stored_one_hiding_a_file_of_its_name(
    app: FakeApp,
) -> None:
    org, agent = await org_with_agent(app)
    from_file(app, org, "review")
    from_file(app, org, "translate")
    await create(app).execute(save(agent))
    app.store.templates[(org.id, "review")] = builders.prompt_template(org.id, name="review")
    listed = await ListPromptTemplates(app.uow, app.files).execute(member(org))
    assert [(v.template.name, v.from_file) for v in listed] == [
        ("review", False),
        ("summarize", False),
        ("translate", True),
    ]
    assert [v.agent_slug for v in listed] == [None, None, "writer"]
    other, _ = await org_with_agent(app)
    assert await ListPromptTemplates(app.uow, app.files).execute(member(other)) == []


async def test_a_template_is_found_stored_or_in_the_prompts_directory(app: FakeApp) -> None:
    org, agent = await org_with_agent(app)
    file_template = from_file(app, org, "review", agent_slug=None)
    created = await create(app).execute(save(agent))
    get = GetPromptTemplate(app.uow, app.files)
    assert (await get.execute(member(org), "summarize")).template == created
    found = await get.execute(member(org), "review")
    assert found.template == file_template and found.from_file and found.agent_slug is None
    with pytest.raises(PromptTemplateNotFound):
        await get.execute(member(org), "missing")


async def test_a_template_is_rendered_with_its_arguments(app: FakeApp) -> None:
    org, agent = await org_with_agent(app)
    await create(app).execute(save(agent))
    render = RenderPromptTemplate(app.uow, app.files)
    rendered = await render.execute(RenderCommand(caller=member(org), name="summarize", arguments={"text": "the memo"}))
    assert rendered == (PromptMessage(role="user", content="Summarize the memo"),)
    with pytest.raises(MissingArguments, match="text"):
        await render.execute(RenderCommand(caller=member(org), name="summarize"))
    with pytest.raises(PromptTemplateNotFound):
        await render.execute(RenderCommand(caller=member(org), name="other"))
