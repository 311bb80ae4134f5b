from collections.abc import Sequence

from application.caller import Caller
from application.mcp_access import load_enabled_integration, target_of
from application.ports.mcp import (
    McpGateway,
    McpPromptInfo,
    McpResourceInfo,
    McpResourceTemplateInfo,
    McpTarget,
    McpToolInfo,
)
from application.ports.persistence import UnitOfWork
from application.ports.security import SecretBox
from domain.ids import IntegrationId
from domain.integrations import McpIntegration


class _CatalogQuery:
    def __init__(self, uow: UnitOfWork, secrets: SecretBox, gateway: McpGateway) -> None:
        self._uow, self._secrets, self._gateway = uow, secrets, gateway

    async def _target(self, caller: Caller, integration_id: IntegrationId) -> tuple[McpIntegration, McpTarget]:
        async with self._uow.read_only() as uow:
            integration = await load_enabled_integration(uow, caller.org_id, integration_id)
        return integration, target_of(integration, self._secrets)


class ListMcpTools(_CatalogQuery):
    """The integration's tools after its tool filter, every page followed."""

    async def execute(self, caller: Caller, integration_id: IntegrationId) -> Sequence[McpToolInfo]:
        integration, target = await self._target(caller, integration_id)
        tools = await self._gateway.list_tools(target)
        return [t for t in tools if integration.tool_filter.allows(t.name)]


class ListMcpResources(_CatalogQuery):
    async def execute(self, caller: Caller, integration_id: IntegrationId) -> Sequence[McpResourceInfo]:
        _, target = await self._target(caller, integration_id)
        return await self._gateway.list_resources(target)


class ListMcpResourceTemplates(_CatalogQuery):
    async def execute(self, caller: Caller, integration_id: IntegrationId) -> Sequence[McpResourceTemplateInfo]:
        _, target = await self._target(caller, integration_id)
        return await self._gateway.list_resource_templates(target)


class ListMcpPrompts(_CatalogQuery):
    async def execute(self, caller: Caller, integration_id: IntegrationId) -> Sequence[McpPromptInfo]:
        _, target = await self._target(caller, integration_id)
        return await self._gateway.list_prompts(target)
