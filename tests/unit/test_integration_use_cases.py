"""MCP integrations on fakes: admins manage them, credentials are sealed, where they may point, the
connection test, and the catalogs members read through them."""

from datetime import timedelta

import pytest

from application.errors import (
    InvalidReference,
    McpAuthFailed,
    McpConnectionFailed,
    McpIntegrationDisabled,
    McpIntegrationNotFound,
    PermissionDenied,
    SlugTaken,
    UrlNotAllowed,
)
from application.pagination import PageRequest
from application.ports.mcp import McpPromptInfo, McpResourceInfo, McpResourceTemplateInfo, McpServerInfo, McpToolInfo
from application.use_cases.integrations import (
    CreateMcpIntegration,
    CreateMcpIntegrationCommand,
    DeleteMcpIntegration,
    GetMcpIntegration,
    ListMcpIntegrations,
    RotateCredentialEncryption,
    TestMcpIntegration,
    UpdateMcpIntegration,
    UpdateMcpIntegrationCommand,
)
from application.use_cases.mcp_catalog import ListMcpPrompts, ListMcpResources, ListMcpResourceTemplates, ListMcpTools
from domain.errors import InvalidValue
from domain.integrations import (
    AuthType,
    ConnectionStatus,
    FilterMode,
    IntegrationChanges,
    McpIntegration,
    SealedSecret,
    ToolFilter,
    Transport,
)
from domain.organizations import Organization
from tests.unit.fakes.app import FakeApp, admin, member
from tests.unit.fakes.ports import NOW, FakeGateway, OperatorServers, Outbound, PlainSecrets

SERVER = McpServerInfo(
    name="memo",
    version="1.0",
    protocol_version="2025-06-18",
    capabilities={"tools": {}},
    tools=2,
    resources=0,
    resource_templates=0,
    prompts=0,
)


@pytest.fixture
def app() -> FakeApp:
    return FakeApp(outbound=Outbound("10.0.0.1"), servers=OperatorServers("github", "files"))


def create(app: FakeApp) -> CreateMcpIntegration:
    return CreateMcpIntegration(app.uow, app.clock, app.ids, app.secrets, app.outbound, app.servers)


def update(app: FakeApp) -> UpdateMcpIntegration:
    return UpdateMcpIntegration(app.uow, app.clock, app.secrets, app.outbound, app.servers, app.gateway)


def probe(app: FakeApp) -> TestMcpIntegration:
    return TestMcpIntegration(app.uow, app.clock, app.secrets, app.gateway)


async def stored(app: FakeApp, integration: McpIntegration) -> McpIntegration:
    async with app.uow.read_only() as uow:
        found = await uow.integrations.get(integration.org_id, integration.id)
    assert found is not None
    return found


async def bearer(app: FakeApp, org: Organization, token: str = "secret-token-1234") -> McpIntegration:
    return await create(app).execute(
        CreateMcpIntegrationCommand(
            caller=admin(org), name="Memo", url="https://mcp.example/mcp", auth_type=AuthType.BEARER, credentials=token
        )
    )


# -- CreateMcpIntegration -------------------------------------------------------------------------------


async def test_an_admin_creates_an_integration_with_its_credentials_sealed(app: FakeApp) -> None:
    org = await app.organization()
    integration = await bearer(app, org, token="secret-token-1234")
    saved = await stored(app, integration)
    assert (saved.slug, saved.url, saved.auth_type) == ("memo", "https://mcp.example/mcp", AuthType.BEARER)
    assert saved.credentials == SealedSecret(ciphertext="sealed:secret-token-1234", last4="1234")
    assert app.outbound.checked == ["https://mcp.example/mcp"]


async def test_the_last_four_characters_of_a_short_credential_are_not_shown(app: FakeApp) -> None:
    org = await app.organization()
    integration = await bearer(app, org, token="short-token")
    assert integration.credentials is not None and integration.credentials.last4 == ""


@pytest.mark.parametrize("credentials", ["", "line\nbreak", "x" * 8_193])
async def test_credentials_that_cannot_be_sent_as_a_header_are_refused(app: FakeApp, credentials: str) -> None:
    org = await app.organization()
    with pytest.raises(InvalidValue, match="credentials"):
        await bearer(app, org, token=credentials)
    assert app.store.integrations == {}


async def test_a_member_may_not_create_an_integration(app: FakeApp) -> None:
    org = await app.organization()
    with pytest.raises(PermissionDenied):
        await create(app).execute(CreateMcpIntegrationCommand(caller=member(org), name="Memo", url="https://m.example"))
    assert app.store.integrations == {} and app.outbound.checked == []


async def test_an_integration_may_not_point_where_the_outbound_guard_refuses(app: FakeApp) -> None:
    org = await app.organization()
    with pytest.raises(UrlNotAllowed):
        await create(app).execute(
            CreateMcpIntegrationCommand(caller=admin(org), name="Memo", url="http://10.0.0.1/mcp")
        )
    assert app.store.integrations == {}


async def test_a_stdio_integration_names_a_server_the_operator_defined(app: FakeApp) -> None:
    org = await app.organization()
    command = CreateMcpIntegrationCommand(caller=admin(org), name="GitHub", transport=Transport.STDIO, server="github")
    integration = await create(app).execute(command)
    assert (integration.transport, integration.server, integration.url) == (Transport.STDIO, "github", None)
    assert app.outbound.checked == []


async def test_a_stdio_server_the_operator_did_not_define_is_an_invalid_reference(app: FakeApp) -> None:
    org = await app.organization()
    command = CreateMcpIntegrationCommand(caller=admin(org), name="Shell", transport=Transport.STDIO, server="bash")
    with pytest.raises(InvalidReference, match="files, github"):
        await create(app).execute(command)
    assert app.store.integrations == {}


async def test_a_slug_already_used_in_the_organization_is_refused(app: FakeApp) -> None:
    org = await app.organization()
    await bearer(app, org)
    command = CreateMcpIntegrationCommand(caller=admin(org), name="Other", slug="memo", url="https://mcp.example/mcp")
    with pytest.raises(SlugTaken):
        await create(app).execute(command)
    assert len(app.store.integrations) == 1


async def test_a_derived_slug_already_used_is_numbered(app: FakeApp) -> None:
    org = await app.organization()
    assert [(await bearer(app, org)).slug for _ in range(2)] == ["memo", "memo-2"]


async def test_an_integration_that_breaks_a_rule_is_refused(app: FakeApp) -> None:
    org = await app.organization()
    command = CreateMcpIntegrationCommand(caller=admin(org), name="Memo", url="https://m.example", timeout_seconds=0)
    with pytest.raises(InvalidValue, match="timeout_seconds"):
        await create(app).execute(command)


# -- GetMcpIntegration, ListMcpIntegrations ---------------------------------------------------------------


async def test_an_integration_is_read_by_its_organization_only(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    integration = await app.integration(org)
    assert await GetMcpIntegration(app.uow).execute(member(org), integration.id) == integration
    with pytest.raises(McpIntegrationNotFound):
        await GetMcpIntegration(app.uow).execute(admin(other), integration.id)


async def test_integrations_are_listed_page_by_page(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    made = [await app.integration(org, slug=f"memo-{n}") for n in range(3)]
    await app.integration(other)
    first = await ListMcpIntegrations(app.uow).execute(member(org), PageRequest(limit=2))
    rest = await ListMcpIntegrations(app.uow).execute(member(org), PageRequest(limit=2, cursor=first.next_cursor))
    assert sorted(i.id for i in [*first.items, *rest.items]) == sorted(i.id for i in made)
    assert len(first.items) == 2 and rest.next_cursor is None


# -- UpdateMcpIntegration -------------------------------------------------------------------------------------


async def test_an_update_resets_the_connection_state_and_drops_the_pooled_session(app: FakeApp) -> None:
    org = await app.organization()
    integration = await app.integration(
        org, connection_status=ConnectionStatus.FAILED, last_error="refused", last_checked_at=NOW
    )
    app.clock.advance(10)
    command = UpdateMcpIntegrationCommand(
        caller=admin(org), integration_id=integration.id, changes=IntegrationChanges(name="Memo 2", enabled=False)
    )
    updated = await update(app).execute(command)
    saved = await stored(app, integration)
    assert saved == updated
    assert (saved.name, saved.enabled, saved.connection_status, saved.last_error) == (
        "Memo 2",
        False,
        ConnectionStatus.UNKNOWN,
        None,
    )
    assert saved.updated_at == NOW + timedelta(seconds=10)
    assert app.gateway.forgotten == [integration.id]
    assert app.outbound.checked == []  # the address did not change


async def test_new_credentials_are_sealed_on_update(app: FakeApp) -> None:
    org = await app.organization()
    integration = await bearer(app, org, token="old-token-0000")
    command = UpdateMcpIntegrationCommand(
        caller=admin(org), integration_id=integration.id, changes=IntegrationChanges(), credentials="new-token-9999"
    )
    await update(app).execute(command)
    assert (await stored(app, integration)).credentials == SealedSecret(
        ciphertext="sealed:new-token-9999", last4="9999"
    )


async def test_credentials_are_cleared_with_the_auth_type(app: FakeApp) -> None:
    org = await app.organization()
    integration = await bearer(app, org)
    changes = IntegrationChanges(auth_type=AuthType.NONE)
    await update(app).execute(
        UpdateMcpIntegrationCommand(caller=admin(org), integration_id=integration.id, changes=changes)
    )
    saved = await stored(app, integration)
    assert (saved.auth_type, saved.credentials) == (AuthType.NONE, None)


async def test_a_new_address_is_checked_by_the_outbound_guard(app: FakeApp) -> None:
    org = await app.organization()
    integration = await app.integration(org)
    refused = IntegrationChanges(url="http://10.0.0.1/mcp")
    with pytest.raises(UrlNotAllowed):
        await update(app).execute(
            UpdateMcpIntegrationCommand(caller=admin(org), integration_id=integration.id, changes=refused)
        )
    assert await stored(app, integration) == integration and app.gateway.forgotten == []
    allowed = IntegrationChanges(url="https://other.example/mcp")
    await update(app).execute(
        UpdateMcpIntegrationCommand(caller=admin(org), integration_id=integration.id, changes=allowed)
    )
    assert (await stored(app, integration)).url == "https://other.example/mcp"
    assert app.outbound.checked == ["http://10.0.0.1/mcp", "https://other.example/mcp"]


async def test_switching_to_stdio_needs_a_server_the_operator_defined(app: FakeApp) -> None:
    org = await app.organization()
    integration = await app.integration(org)
    unknown = IntegrationChanges(transport=Transport.STDIO, server="bash")
    with pytest.raises(InvalidReference):
        await update(app).execute(
            UpdateMcpIntegrationCommand(caller=admin(org), integration_id=integration.id, changes=unknown)
        )
    known = IntegrationChanges(transport=Transport.STDIO, server="files")
    await update(app).execute(
        UpdateMcpIntegrationCommand(caller=admin(org), integration_id=integration.id, changes=known)
    )
    saved = await stored(app, integration)
    assert (saved.transport, saved.server, saved.url) == (Transport.STDIO, "files", None)


async def test_a_member_may_not_change_an_integration(app: FakeApp) -> None:
    org = await app.organization()
    integration = await app.integration(org)
    command = UpdateMcpIntegrationCommand(
        caller=member(org), integration_id=integration.id, changes=IntegrationChanges(enabled=False)
    )
    with pytest.raises(PermissionDenied):
        await update(app).execute(command)
    assert (await stored(app, integration)).enabled and app.gateway.forgotten == []


async def test_another_organizations_integration_cannot_be_changed(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    integration = await app.integration(org)
    command = UpdateMcpIntegrationCommand(
        caller=admin(other), integration_id=integration.id, changes=IntegrationChanges(enabled=False)
    )
    with pytest.raises(McpIntegrationNotFound):
        await update(app).execute(command)
    assert (await stored(app, integration)).enabled


# -- DeleteMcpIntegration ---------------------------------------------------------------------------------------


async def test_deleting_an_integration_removes_it_from_the_agents_that_used_it(app: FakeApp) -> None:
    org = await app.organization()
    integration, kept = await app.integration(org), await app.integration(org, slug="kept")
    agent = await app.agent(org, mcp_integration_ids=(integration.id, kept.id))
    await DeleteMcpIntegration(app.uow, app.clock, app.gateway).execute(admin(org), integration.id)
    assert set(app.store.integrations) == {kept.id}
    assert app.store.agents[agent.id].mcp_integration_ids == (kept.id,)
    assert app.gateway.forgotten == [integration.id]


async def test_only_an_admin_of_the_organization_deletes_an_integration(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    integration = await app.integration(org)
    delete = DeleteMcpIntegration(app.uow, app.clock, app.gateway)
    with pytest.raises(PermissionDenied):
        await delete.execute(member(org), integration.id)
    with pytest.raises(McpIntegrationNotFound):
        await delete.execute(admin(other), integration.id)
    assert integration.id in app.store.integrations and app.gateway.forgotten == []


# -- TestMcpIntegration ---------------------------------------------------------------------------------------


async def test_a_connection_test_describes_the_server_and_records_success(app: FakeApp) -> None:
    app.gateway = FakeGateway(server=SERVER)
    org = await app.organization()
    integration = await bearer(app, org, token="secret-token-1234")
    app.clock.advance(3)
    result = await probe(app).execute(admin(org), integration.id)
    assert result.server == SERVER and result.error is None
    saved = await stored(app, integration)
    assert (saved.connection_status, saved.last_error) == (ConnectionStatus.CONNECTED, None)
    assert saved.last_checked_at == NOW + timedelta(seconds=3)
    assert result.integration == saved
    assert app.gateway.targets[0].headers == {"Authorization": "Bearer secret-token-1234"}


async def test_a_failed_connection_test_is_recorded_with_its_reason(app: FakeApp) -> None:
    app.gateway = FakeGateway(failure=McpAuthFailed("the server refused the credentials"))
    org = await app.organization()
    integration = await app.integration(org)
    result = await probe(app).execute(admin(org), integration.id)
    assert result.server is None and isinstance(result.error, McpAuthFailed)
    saved = await stored(app, integration)
    assert (saved.connection_status, saved.last_error) == (
        ConnectionStatus.FAILED,
        "the server refused the credentials",
    )


async def test_a_member_may_not_test_an_integration(app: FakeApp) -> None:
    app.gateway = FakeGateway(server=SERVER)
    org = await app.organization()
    integration = await app.integration(org)
    with pytest.raises(PermissionDenied):
        await probe(app).execute(member(org), integration.id)
    assert app.gateway.targets == []
    assert (await stored(app, integration)).last_checked_at is None


async def test_an_integration_of_another_organization_is_not_tested(app: FakeApp) -> None:
    app.gateway = FakeGateway(server=SERVER)
    org, other = await app.organization(), await app.organization()
    integration = await app.integration(org)
    with pytest.raises(McpIntegrationNotFound):
        await probe(app).execute(admin(other), integration.id)
    assert app.gateway.targets == []


async def test_a_connection_test_does_not_overwrite_a_change_made_meanwhile(app: FakeApp) -> None:
    org = await app.organization()
    integration = await app.integration(org)
    changed = IntegrationChanges(name="Changed meanwhile")

    class ChangedWhileProbing(FakeGateway):
        async def probe(self, target: object) -> McpServerInfo:
            app.clock.advance(1)
            await update(app).execute(
                UpdateMcpIntegrationCommand(caller=admin(org), integration_id=integration.id, changes=changed)
            )
            return SERVER

    app.gateway = ChangedWhileProbing()
    result = await probe(app).execute(admin(org), integration.id)
    saved = await stored(app, integration)
    assert saved.name == "Changed meanwhile" and saved.connection_status is ConnectionStatus.UNKNOWN
    assert result.server == SERVER and result.integration == saved


# -- RotateCredentialEncryption ----------------------------------------------------------------------------------


class RotatingSecrets(PlainSecrets):
    """Seals under a new key: what it rotates reads `rotated:<plaintext>`."""

    def rotate(self, ciphertext: str) -> str:
        return f"rotated:{self.open(ciphertext)}"


async def test_rotation_reencrypts_every_stored_credential(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    first = await bearer(app, org, token="first-token-1111")
    second = await bearer(app, other, token="second-token-2222")
    plain = await app.integration(org, slug="plain")
    count = await RotateCredentialEncryption(app.uow, RotatingSecrets()).execute()
    assert count == 2
    assert (await stored(app, first)).credentials == SealedSecret(ciphertext="rotated:first-token-1111", last4="1111")
    assert (await stored(app, second)).credentials == SealedSecret(ciphertext="rotated:second-token-2222", last4="2222")
    assert (await stored(app, plain)).credentials is None


# -- the catalogs: ListMcpTools, ListMcpResources, ListMcpResourceTemplates, ListMcpPrompts ---------------------------


TOOLS = [
    McpToolInfo(name="search", description="Search", input_schema={"type": "object"}),
    McpToolInfo(name="delete_all", description="Delete", input_schema={"type": "object"}),
]


async def test_the_tools_listed_are_those_the_tool_filter_allows(app: FakeApp) -> None:
    app.gateway = FakeGateway(tools=TOOLS)
    org = await app.organization()
    integration = await app.integration(org, tool_filter=ToolFilter(mode=FilterMode.EXCLUDE, names=("delete_all",)))
    listed = await ListMcpTools(app.uow, app.secrets, app.gateway).execute(member(org), integration.id)
    assert [t.name for t in listed] == ["search"]


async def test_resources_templates_and_prompts_are_listed_as_the_server_gives_them(app: FakeApp) -> None:
    resources = [McpResourceInfo(uri="memo://1", name="First memo")]
    templates = [McpResourceTemplateInfo(uri_template="memo://{id}", name="Memo")]
    prompts = [McpPromptInfo(name="summarize")]
    app.gateway = FakeGateway(resources=resources, templates=templates, prompts=prompts)
    org = await app.organization()
    integration = await app.integration(org)
    caller, secrets, gateway = member(org), app.secrets, app.gateway
    assert await ListMcpResources(app.uow, secrets, gateway).execute(caller, integration.id) == resources
    assert await ListMcpResourceTemplates(app.uow, secrets, gateway).execute(caller, integration.id) == templates
    assert await ListMcpPrompts(app.uow, secrets, gateway).execute(caller, integration.id) == prompts


async def test_a_header_credential_reaches_the_server_under_its_header_name(app: FakeApp) -> None:
    org = await app.organization()
    integration = await create(app).execute(
        CreateMcpIntegrationCommand(
            caller=admin(org),
            name="Memo",
            url="https://mcp.example/mcp",
            auth_type=AuthType.HEADER,
            auth_header_name="X-Api-Key",
            credentials="k-123",
        )
    )
    await ListMcpPrompts(app.uow, app.secrets, app.gateway).execute(member(org), integration.id)
    assert app.gateway.targets[0].headers == {"X-Api-Key": "k-123"}


async def test_the_catalogs_of_a_disabled_or_foreign_integration_are_not_read(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    disabled = await app.integration(org, enabled=False)
    mine = await app.integration(org, slug="mine")
    with pytest.raises(McpIntegrationDisabled):
        await ListMcpTools(app.uow, app.secrets, app.gateway).execute(member(org), disabled.id)
    with pytest.raises(McpIntegrationNotFound):
        await ListMcpResources(app.uow, app.secrets, app.gateway).execute(member(other), mine.id)
    assert app.gateway.targets == []


async def test_a_server_that_cannot_be_reached_is_an_error_of_the_catalog(app: FakeApp) -> None:
    app.gateway = FakeGateway(failing={"list_prompts": McpConnectionFailed("connection refused")})
    org = await app.organization()
    integration = await app.integration(org)
    with pytest.raises(McpConnectionFailed):
        await ListMcpPrompts(app.uow, app.secrets, app.gateway).execute(member(org), integration.id)
