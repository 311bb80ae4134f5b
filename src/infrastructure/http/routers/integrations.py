from typing import Annotated
from uuid import UUID

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Response

from application.errors import (
    Conflict,
    InvalidReference,
    McpCapabilityMissing,
    McpInputNeeded,
    McpIntegrationDisabled,
    McpIntegrationNotFound,
    McpInvalidArguments,
    McpPromptNotFound,
    McpResourceNotFound,
    McpToolNotFound,
    PermissionDenied,
    SlugTaken,
    UrlNotAllowed,
)
from application.pagination import PageRequest
from application.use_cases.integrations import (
    CreateMcpIntegration,
    DeleteMcpIntegration,
    GetMcpIntegration,
    ListMcpIntegrations,
    TestMcpIntegration,
    UpdateMcpIntegration,
    UpdateMcpIntegrationCommand,
)
from application.use_cases.mcp_catalog import (
    ListMcpPrompts,
    ListMcpResources,
    ListMcpResourceTemplates,
    ListMcpTools,
)
from application.use_cases.mcp_operations import (
    ExecuteMcpTool,
    ExecuteMcpToolCommand,
    GetMcpPrompt,
    GetMcpPromptQuery,
    ReadMcpResource,
    ReadMcpResourceQuery,
    RetrieveMcpResource,
    RetrieveMcpResourceCommand,
)
from domain.errors import InvalidValue
from domain.ids import IntegrationId, ThreadId
from domain.integrations import IntegrationChanges
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openapi import MCP_SERVER, ApiRoute, errors
from infrastructure.http.schemas.common import PageOut, page_request
from infrastructure.http.schemas.integrations import (
    CatalogOut,
    ConnectionTestOut,
    IntegrationCreate,
    IntegrationOut,
    IntegrationUpdate,
    PromptGetIn,
    PromptOut,
    PromptResultOut,
    ResourceContentOut,
    ResourceOut,
    ResourceReadIn,
    ResourceTemplateOut,
    ToolCallIn,
    ToolCallOut,
    ToolOut,
)
from infrastructure.http.schemas.sources import ImportedResourceOut

router = APIRouter(prefix="/v1/mcp-integrations", tags=["MCP integrations"], route_class=ApiRoute)


@router.post(
    "",
    status_code=201,
    response_model=IntegrationOut,
    summary="Connect an MCP server (admin)",
    responses=errors(PermissionDenied, SlugTaken, InvalidReference, UrlNotAllowed, InvalidValue, Conflict),
)
@inject
async def create_integration(
    body: IntegrationCreate,
    caller: CallerDep,
    use_case: Annotated[CreateMcpIntegration, Depends(Provide[Container.create_mcp_integration])],
) -> IntegrationOut:
    return IntegrationOut.model_validate(await use_case.execute(body.to_command(caller)))


@router.get("", response_model=PageOut[IntegrationOut])
@inject
async def list_integrations(
    caller: CallerDep,
    page: Annotated[PageRequest, Depends(page_request)],
    use_case: Annotated[ListMcpIntegrations, Depends(Provide[Container.list_mcp_integrations])],
) -> PageOut[IntegrationOut]:
    result = await use_case.execute(caller, page)
    return PageOut[IntegrationOut].model_validate(result)


@router.get("/{integration_id}", response_model=IntegrationOut, responses=errors(McpIntegrationNotFound))
@inject
async def get_integration(
    integration_id: UUID,
    caller: CallerDep,
    use_case: Annotated[GetMcpIntegration, Depends(Provide[Container.get_mcp_integration])],
) -> IntegrationOut:
    return IntegrationOut.model_validate(await use_case.execute(caller, IntegrationId(integration_id)))


@router.patch(
    "/{integration_id}",
    response_model=IntegrationOut,
    summary="Change an integration (admin)",
    responses=errors(
        PermissionDenied, McpIntegrationNotFound, SlugTaken, InvalidReference, UrlNotAllowed, InvalidValue, Conflict
    ),
)
@inject
async def update_integration(
    integration_id: UUID,
    body: IntegrationUpdate,
    caller: CallerDep,
    use_case: Annotated[UpdateMcpIntegration, Depends(Provide[Container.update_mcp_integration])],
) -> IntegrationOut:
    return IntegrationOut.model_validate(await use_case.execute(body.to_command(caller, integration_id)))


@router.post(
    "/{integration_id}/enable",
    response_model=IntegrationOut,
    summary="Enable (admin)",
    responses=errors(PermissionDenied, McpIntegrationNotFound, Conflict),
)
@inject
async def enable_integration(
    integration_id: UUID,
    caller: CallerDep,
    use_case: Annotated[UpdateMcpIntegration, Depends(Provide[Container.update_mcp_integration])],
) -> IntegrationOut:
    command = UpdateMcpIntegrationCommand(
        caller=caller, integration_id=IntegrationId(integration_id), changes=IntegrationChanges(enabled=True)
    )
    return IntegrationOut.model_validate(await use_case.execute(command))


@router.post(
    "/{integration_id}/disable",
    response_model=IntegrationOut,
    summary="Disable (admin)",
    responses=errors(PermissionDenied, McpIntegrationNotFound, Conflict),
)
@inject
async def disable_integration(
    integration_id: UUID,
    caller: CallerDep,
    use_case: Annotated[UpdateMcpIntegration, Depends(Provide[Container.update_mcp_integration])],
) -> IntegrationOut:
    command = UpdateMcpIntegrationCommand(
        caller=caller, integration_id=IntegrationId(integration_id), changes=IntegrationChanges(enabled=False)
    )
    return IntegrationOut.model_validate(await use_case.execute(command))


@router.delete(
    "/{integration_id}",
    status_code=204,
    response_class=Response,
    summary="Delete (admin)",
    responses=errors(PermissionDenied, McpIntegrationNotFound, Conflict),
)
@inject
async def delete_integration(
    integration_id: UUID,
    caller: CallerDep,
    use_case: Annotated[DeleteMcpIntegration, Depends(Provide[Container.delete_mcp_integration])],
) -> Response:
    await use_case.execute(caller, IntegrationId(integration_id))
    return Response(status_code=204)


@router.post(
    "/{integration_id}/test",
    response_model=ConnectionTestOut,
    summary="Connect and describe the server",
    responses=errors(PermissionDenied, McpIntegrationNotFound, McpIntegrationDisabled, UrlNotAllowed, *MCP_SERVER),
)
@inject
async def test_integration(
    integration_id: UUID,
    caller: CallerDep,
    use_case: Annotated[TestMcpIntegration, Depends(Provide[Container.test_mcp_integration])],
) -> ConnectionTestOut:
    return ConnectionTestOut.of(await use_case.execute(caller, IntegrationId(integration_id)))


@router.get(
    "/{integration_id}/tools",
    response_model=CatalogOut[ToolOut],
    summary="Tools, after the tool filter",
    responses=errors(McpIntegrationNotFound, McpIntegrationDisabled, UrlNotAllowed, *MCP_SERVER),
)
@inject
async def list_tools(
    integration_id: UUID,
    caller: CallerDep,
    use_case: Annotated[ListMcpTools, Depends(Provide[Container.list_mcp_tools])],
) -> CatalogOut[ToolOut]:
    return CatalogOut[ToolOut].model_validate({"data": await use_case.execute(caller, IntegrationId(integration_id))})


@router.get(
    "/{integration_id}/resources",
    response_model=CatalogOut[ResourceOut],
    responses=errors(McpIntegrationNotFound, McpIntegrationDisabled, UrlNotAllowed, *MCP_SERVER),
)
@inject
async def list_resources(
    integration_id: UUID,
    caller: CallerDep,
    use_case: Annotated[ListMcpResources, Depends(Provide[Container.list_mcp_resources])],
) -> CatalogOut[ResourceOut]:
    items = await use_case.execute(caller, IntegrationId(integration_id))
    return CatalogOut[ResourceOut].model_validate({"data": items})


@router.get(
    "/{integration_id}/resource-templates",
    response_model=CatalogOut[ResourceTemplateOut],
    responses=errors(McpIntegrationNotFound, McpIntegrationDisabled, UrlNotAllowed, *MCP_SERVER),
)
@inject
async def list_resource_templates(
    integration_id: UUID,
    caller: CallerDep,
    use_case: Annotated[ListMcpResourceTemplates, Depends(Provide[Container.list_mcp_resource_templates])],
) -> CatalogOut[ResourceTemplateOut]:
    items = await use_case.execute(caller, IntegrationId(integration_id))
    return CatalogOut[ResourceTemplateOut].model_validate({"data": items})


@router.get(
    "/{integration_id}/prompts",
    response_model=CatalogOut[PromptOut],
    responses=errors(McpIntegrationNotFound, McpIntegrationDisabled, UrlNotAllowed, *MCP_SERVER),
)
@inject
async def list_prompts(
    integration_id: UUID,
    caller: CallerDep,
    use_case: Annotated[ListMcpPrompts, Depends(Provide[Container.list_mcp_prompts])],
) -> CatalogOut[PromptOut]:
    return CatalogOut[PromptOut].model_validate({"data": await use_case.execute(caller, IntegrationId(integration_id))})


@router.post(
    "/{integration_id}/tools/{tool_name}/call",
    response_model=ToolCallOut,
    summary="Call a tool",
    responses=errors(
        McpIntegrationNotFound,
        McpToolNotFound,
        McpIntegrationDisabled,
        UrlNotAllowed,
        InvalidValue,
        McpInvalidArguments,
        McpInputNeeded,
        *MCP_SERVER,
    ),
)
@inject
async def call_tool(
    integration_id: UUID,
    tool_name: str,
    body: ToolCallIn,
    caller: CallerDep,
    use_case: Annotated[ExecuteMcpTool, Depends(Provide[Container.execute_mcp_tool])],
) -> ToolCallOut:
    command = ExecuteMcpToolCommand(
        org_id=caller.org_id,
        integration_id=IntegrationId(integration_id),
        tool_name=tool_name,
        arguments=body.arguments,
    )
    return ToolCallOut.model_validate(await use_case.execute(command))


@router.post(
    "/{integration_id}/resources/read",
    response_model=CatalogOut[ResourceContentOut] | ImportedResourceOut,
    summary="Read a resource, or import it as a source of a thread",
    responses=errors(
        McpIntegrationNotFound,
        McpResourceNotFound,
        McpIntegrationDisabled,
        UrlNotAllowed,
        InvalidReference,
        InvalidValue,
        Conflict,
        McpCapabilityMissing,
        *MCP_SERVER,
    ),
)
@inject
async def read_resource(
    integration_id: UUID,
    body: ResourceReadIn,
    caller: CallerDep,
    read: Annotated[ReadMcpResource, Depends(Provide[Container.read_mcp_resource])],
    retrieve: Annotated[RetrieveMcpResource, Depends(Provide[Container.retrieve_mcp_resource])],
) -> CatalogOut[ResourceContentOut] | ImportedResourceOut:
    if body.import_ and body.thread_id is not None:
        command = RetrieveMcpResourceCommand(
            org_id=caller.org_id,
            integration_id=IntegrationId(integration_id),
            uri=body.uri,
            thread_id=ThreadId(body.thread_id),
        )
        return ImportedResourceOut.model_validate(await retrieve.execute(command))
    query = ReadMcpResourceQuery(org_id=caller.org_id, integration_id=IntegrationId(integration_id), uri=body.uri)
    return CatalogOut[ResourceContentOut].model_validate({"data": await read.execute(query)})


@router.post(
    "/{integration_id}/prompts/{prompt_name}/get",
    response_model=PromptResultOut,
    summary="Get a prompt",
    responses=errors(
        McpIntegrationNotFound,
        McpPromptNotFound,
        McpIntegrationDisabled,
        UrlNotAllowed,
        InvalidValue,
        McpInvalidArguments,
        *MCP_SERVER,
    ),
)
@inject
async def get_prompt(
    integration_id: UUID,
    prompt_name: str,
    body: PromptGetIn,
    caller: CallerDep,
    use_case: Annotated[GetMcpPrompt, Depends(Provide[Container.get_mcp_prompt])],
) -> PromptResultOut:
    query = GetMcpPromptQuery(
        org_id=caller.org_id,
        integration_id=IntegrationId(integration_id),
        prompt_name=prompt_name,
        arguments=body.arguments,
    )
    return PromptResultOut.model_validate(await use_case.execute(query))
