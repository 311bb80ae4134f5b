"""Integrations a process keeps after reading them: a run's tool calls reuse what its tool assembly read, and an
integration changed, disabled or deleted is read again at once."""

import dataclasses

import pytest

from application.errors import McpIntegrationDisabled, McpIntegrationNotFound
from application.loaded_integrations import LoadedIntegrations
from application.ports.mcp import McpContentPart, McpToolInfo, McpToolResult
from application.runs.tools.assembly import ToolAssembler
from application.use_cases.mcp_operations import ExecuteMcpTool, ExecuteMcpToolCommand
from tests import builders
from tests.unit.fakes.app import FakeApp
from tests.unit.fakes.ports import FakeGateway

OK = McpToolResult(parts=(McpContentPart(type="text", text="done"),), structured=None, is_error=False)


class Ticking:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def app() -> FakeApp:
    return FakeApp(
        gateway=FakeGateway(tools=[McpToolInfo(name="search", description="Search", input_schema={})], result=OK)
    )


def test_an_integration_is_kept_for_its_time_and_only_for_its_organization() -> None:
    clock = Ticking()
    loaded = LoadedIntegrations(ttl_seconds=30, monotonic=clock)
    integration = builders.integration(builders.organization().id)
    loaded.remember([integration], as_of=loaded.version())
    assert loaded.get(integration.org_id, integration.id) is integration
    assert loaded.get(builders.organization().id, integration.id) is None
    clock.now = 30
    assert loaded.get(integration.org_id, integration.id) is None


def test_a_read_that_raced_a_change_is_not_kept() -> None:
    loaded = LoadedIntegrations()
    integration = builders.integration(builders.organization().id)
    as_of = loaded.version()  # read...
    loaded.forget(integration.id)  # ...while it changes
    loaded.remember([integration], as_of=as_of)
    assert loaded.get(integration.org_id, integration.id) is None


def test_at_most_so_many_integrations_are_kept() -> None:
    loaded = LoadedIntegrations(max_integrations=2)
    org = builders.organization().id
    first, second, third = (builders.integration(org) for _ in range(3))
    loaded.remember([first, second, third], as_of=loaded.version())
    assert loaded.get(org, first.id) is None and loaded.get(org, third.id) is third


async def test_tool_calls_reuse_the_integrations_the_run_assembled_its_tools_from(app: FakeApp) -> None:
    org = await app.organization()
    integration = await app.integration(org)
    agent = await app.agent(org, mcp_integration_ids=(integration.id,))
    loaded = LoadedIntegrations()
    assembler = ToolAssembler(app.uow, app.secrets, app.gateway, app.commands, app.search, app.sandbox, loaded)
    assert (await assembler.assemble(agent)).get("memo__search") is not None
    del app.store.integrations[integration.id]  # the calls do not read it: they would not find it

    command = ExecuteMcpToolCommand(org_id=org.id, integration_id=integration.id, tool_name="search")
    for _ in range(2):
        assert (await ExecuteMcpTool(app.uow, app.secrets, app.gateway, loaded).execute(command)).text == "done"
    assert (await assembler.assemble(agent)).get("memo__search") is not None  # the next run's tools too


async def test_a_forgotten_integration_is_read_again_and_its_change_honoured(app: FakeApp) -> None:
    org = await app.organization()
    integration = await app.integration(org)
    loaded = LoadedIntegrations()
    loaded.remember([integration], as_of=loaded.version())
    execute = ExecuteMcpTool(app.uow, app.secrets, app.gateway, loaded)
    command = ExecuteMcpToolCommand(org_id=org.id, integration_id=integration.id, tool_name="search")

    async with app.uow as uow:
        await uow.integrations.save(dataclasses.replace(integration, enabled=False))
        await uow.commit()
    loaded.forget(integration.id)  # what the gateway's forget does after the change
    with pytest.raises(McpIntegrationDisabled):
        await execute.execute(command)

    async with app.uow as uow:
        await uow.integrations.delete(org.id, integration.id)
        await uow.commit()
    loaded.forget(integration.id)
    with pytest.raises(McpIntegrationNotFound):
        await execute.execute(command)


async def test_another_organizations_integration_is_never_served_from_those_kept(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    theirs = await app.integration(other)
    loaded = LoadedIntegrations()
    loaded.remember([theirs], as_of=loaded.version())
    with pytest.raises(McpIntegrationNotFound):
        await ExecuteMcpTool(app.uow, app.secrets, app.gateway, loaded).execute(
            ExecuteMcpToolCommand(org_id=org.id, integration_id=theirs.id, tool_name="search")
        )
