from typing import Any

from application.loaded_integrations import LoadedIntegrations
from application.ports.mcp import McpGateway
from domain.ids import IntegrationId


class ForgetsLoadedIntegrations:
    """The MCP gateway, whose `forget` (an integration changed, disabled or deleted: called by the use cases of
    this process and by catalog change notices of the others) also drops the integration from those loaded."""

    def __init__(self, gateway: McpGateway, loaded: LoadedIntegrations) -> None:
        self._gateway, self._loaded = gateway, loaded

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gateway, name)

    async def forget(self, integration_id: IntegrationId) -> None:
        self._loaded.forget(integration_id)
        await self._gateway.forget(integration_id)
