"""Agents on fakes: creating one with its links checked, reading and listing within the organization,
partial updates, and deleting one that other agents delegate to."""

from datetime import timedelta

import pytest

from application.errors import AgentNotFound, InvalidCursor, InvalidReference, SlugTaken
from application.pagination import PageRequest
from application.use_cases.agents import (
    CreateAgent,
    CreateAgentCommand,
    DeleteAgent,
    GetAgent,
    ListAgents,
    UpdateAgent,
    UpdateAgentCommand,
)
from domain.agents import Agent, AgentChanges, ModelSettings
from domain.errors import InvalidValue
from domain.ids import AgentId, IntegrationId
from domain.native_tools import ToolRef
from domain.tools import ToolType
from tests.unit.fakes.app import FakeApp, admin, member
from tests.unit.fakes.ports import NOW


@pytest.fixture
def app() -> FakeApp:
    return FakeApp()


def create(app: FakeApp) -> CreateAgent:
    return CreateAgent(app.uow, app.clock, app.ids, default_model="gpt-default")


def update(app: FakeApp) -> UpdateAgent:
    return UpdateAgent(app.uow, app.clock)


async def stored(app: FakeApp, agent: Agent) -> Agent:
    async with app.uow.read_only() as uow:
        found = await uow.agents.get(agent.org_id, agent.id)
    assert found is not None
    return found


# -- CreateAgent ------------------------------------------------------------------------------------


async def test_an_agent_is_created_in_the_callers_organization_with_a_slug_and_the_default_model(
    app: FakeApp,
) -> None:
    org = await app.organization()
    agent = await create(app).execute(CreateAgentCommand(caller=member(org), name="Support Bot", instructions="Help."))
    assert (agent.org_id, agent.slug, agent.model) == (org.id, "support-bot", "gpt-default")
    assert (agent.created_at, agent.updated_at) == (NOW, NOW)
    assert app.store.agents == {agent.id: agent}


async def test_a_given_slug_and_model_are_kept(app: FakeApp) -> None:
    org = await app.organization()
    command = CreateAgentCommand(caller=admin(org), name="Support Bot", slug="helpdesk", model="claude")
    agent = await create(app).execute(command)
    assert (agent.slug, agent.model) == ("helpdesk", "claude")


async def test_a_slug_already_used_in_the_organization_is_refused(app: FakeApp) -> None:
    org = await app.organization()
    await create(app).execute(CreateAgentCommand(caller=admin(org), name="Bot"))
    with pytest.raises(SlugTaken):
        await create(app).execute(CreateAgentCommand(caller=admin(org), name="Other", slug="bot"))
    assert len(app.store.agents) == 1


async def test_a_derived_slug_already_used_is_numbered(app: FakeApp) -> None:
    org = await app.organization()
    slugs = [(await create(app).execute(CreateAgentCommand(caller=admin(org), name="Bot"))).slug for _ in range(3)]
    assert slugs == ["bot", "bot-2", "bot-3"]


async def test_the_same_slug_may_be_used_by_another_organization(app: FakeApp) -> None:
    first, second = await app.organization(), await app.organization()
    await create(app).execute(CreateAgentCommand(caller=admin(first), name="Bot"))
    again = await create(app).execute(CreateAgentCommand(caller=admin(second), name="Bot"))
    assert again.slug == "bot" and len(app.store.agents) == 2


async def test_an_invalid_agent_is_refused_before_anything_is_stored(app: FakeApp) -> None:
    org = await app.organization()
    with pytest.raises(InvalidValue, match="max_steps"):
        await create(app).execute(CreateAgentCommand(caller=admin(org), name="Bot", max_steps=0))
    assert app.store.agents == {}


async def test_sub_agents_of_another_organization_are_an_invalid_reference(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    theirs = await app.agent(other)
    mine = await app.agent(org)
    command = CreateAgentCommand(caller=admin(org), name="Lead", sub_agent_ids=(mine.id, theirs.id))
    with pytest.raises(InvalidReference, match=str(theirs.id)) as refused:
        await create(app).execute(command)
    assert str(mine.id) not in refused.value.detail
    assert set(app.store.agents) == {theirs.id, mine.id}


async def test_integrations_that_do_not_exist_are_an_invalid_reference(app: FakeApp) -> None:
    org = await app.organization()
    integration = await app.integration(org)
    unknown = IntegrationId(app.ids.new())
    command = CreateAgentCommand(caller=admin(org), name="Bot", mcp_integration_ids=(integration.id, unknown))
    with pytest.raises(InvalidReference, match=f"MCP integrations not found: {unknown}$"):
        await create(app).execute(command)


async def test_an_agent_with_existing_links_and_tools_is_stored_with_them(app: FakeApp) -> None:
    org = await app.organization()
    integration = await app.integration(org)
    helper = await app.agent(org)
    command = CreateAgentCommand(
        caller=admin(org),
        name="Lead",
        tools=[ToolRef(type=ToolType.SOURCE_QUERY)],
        mcp_integration_ids=[integration.id],
        sub_agent_ids=[helper.id],
        model_settings=ModelSettings(temperature=0.2),
        publish_as_mcp=True,
    )
    agent = await create(app).execute(command)
    saved = await stored(app, agent)
    assert saved.sub_agent_ids == (helper.id,) and saved.mcp_integration_ids == (integration.id,)
    assert saved.tools == (ToolRef(type=ToolType.SOURCE_QUERY),)
    assert saved.model_settings.as_dict() == {"temperature": 0.2} and saved.publish_as_mcp


# -- GetAgent, ListAgents -----------------------------------------------------------------------------


async def test_an_agent_is_read_by_its_organization_only(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    agent = await app.agent(org)
    assert await GetAgent(app.uow).execute(member(org), agent.id) == agent
    with pytest.raises(AgentNotFound):
        await GetAgent(app.uow).execute(admin(other), agent.id)


async def test_agents_are_listed_page_by_page_without_those_of_other_organizations(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    mine = [await app.agent(org) for _ in range(5)]
    await app.agent(other)
    pages, cursor = [], None
    while True:
        page = await ListAgents(app.uow).execute(member(org), PageRequest(limit=2, cursor=cursor))
        pages.append([a.id for a in page.items])
        cursor = page.next_cursor
        if cursor is None:
            break
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [i for p in pages for i in p] == sorted(a.id for a in mine)


async def test_a_full_last_page_has_no_cursor(app: FakeApp) -> None:
    org = await app.organization()
    for _ in range(2):
        await app.agent(org)
    page = await ListAgents(app.uow).execute(member(org), PageRequest(limit=2))
    assert len(page.items) == 2 and page.next_cursor is None


async def test_a_cursor_the_api_did_not_hand_out_is_refused(app: FakeApp) -> None:
    org = await app.organization()
    with pytest.raises(InvalidCursor):
        await ListAgents(app.uow).execute(member(org), PageRequest(cursor="not-a-cursor"))


# -- UpdateAgent --------------------------------------------------------------------------------------


async def test_an_update_changes_only_the_given_fields_and_the_update_time(app: FakeApp) -> None:
    org = await app.organization()
    agent = await app.agent(org, instructions="Be brief.")
    app.clock.advance(60)
    changes = AgentChanges(name="Renamed", max_steps=5)
    updated = await update(app).execute(UpdateAgentCommand(caller=member(org), agent_id=agent.id, changes=changes))
    saved = await stored(app, agent)
    assert saved == updated
    assert (saved.name, saved.max_steps, saved.instructions, saved.slug) == ("Renamed", 5, "Be brief.", agent.slug)
    assert saved.updated_at == NOW + timedelta(seconds=60) and saved.created_at == NOW


async def test_an_invalid_update_leaves_the_agent_as_it_was(app: FakeApp) -> None:
    org = await app.organization()
    agent = await app.agent(org)
    changes = AgentChanges(name="Renamed", max_steps=1000)
    with pytest.raises(InvalidValue):
        await update(app).execute(UpdateAgentCommand(caller=admin(org), agent_id=agent.id, changes=changes))
    assert await stored(app, agent) == agent


async def test_an_update_that_links_an_unknown_sub_agent_is_refused_and_not_saved(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    agent = await app.agent(org)
    theirs = await app.agent(other)
    changes = AgentChanges(name="Renamed", sub_agent_ids=[theirs.id])
    with pytest.raises(InvalidReference):
        await update(app).execute(UpdateAgentCommand(caller=admin(org), agent_id=agent.id, changes=changes))
    assert (await stored(app, agent)).name == agent.name


async def test_a_slug_taken_by_another_agent_is_refused_on_update(app: FakeApp) -> None:
    org = await app.organization()
    first = await app.agent(org, slug="first")
    second = await app.agent(org, slug="second")
    with pytest.raises(SlugTaken):
        await update(app).execute(
            UpdateAgentCommand(caller=admin(org), agent_id=second.id, changes=AgentChanges(slug=first.slug))
        )
    assert (await stored(app, second)).slug == "second"


async def test_another_organizations_agent_cannot_be_updated(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    agent = await app.agent(org)
    with pytest.raises(AgentNotFound):
        await update(app).execute(
            UpdateAgentCommand(caller=admin(other), agent_id=agent.id, changes=AgentChanges(name="Mine now"))
        )
    assert await stored(app, agent) == agent


# -- DeleteAgent --------------------------------------------------------------------------------------


async def test_deleting_an_agent_removes_it_and_agents_that_delegated_to_it_forget_it(app: FakeApp) -> None:
    org = await app.organization()
    helper, other_helper = await app.agent(org), await app.agent(org)
    lead = await app.agent(org, sub_agent_ids=(helper.id, other_helper.id))
    app.clock.advance(5)
    await DeleteAgent(app.uow, app.clock).execute(member(org), helper.id)
    assert helper.id not in app.store.agents
    saved_lead = await stored(app, lead)
    assert saved_lead.sub_agent_ids == (other_helper.id,)
    assert saved_lead.updated_at == NOW + timedelta(seconds=5)
    assert await stored(app, other_helper) == other_helper


async def test_deleting_an_agent_keeps_its_threads(app: FakeApp) -> None:
    org = await app.organization()
    agent = await app.agent(org)
    thread = await app.thread(agent)
    await DeleteAgent(app.uow, app.clock).execute(admin(org), agent.id)
    assert thread.id in app.store.threads


async def test_another_organizations_agent_cannot_be_deleted(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    agent = await app.agent(org)
    with pytest.raises(AgentNotFound):
        await DeleteAgent(app.uow, app.clock).execute(admin(other), agent.id)
    with pytest.raises(AgentNotFound):
        await DeleteAgent(app.uow, app.clock).execute(admin(org), AgentId(app.ids.new()))
    assert agent.id in app.store.agents
