from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from domain.ids import IntegrationId, OrgId
from domain.integrations import (
    AuthType,
    ConnectionStatus,
    FilterMode,
    McpIntegration,
    SealedSecret,
    ToolFilter,
    Transport,
)
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.errors import refused
from infrastructure.persistence.repositories._rows import utc, utc_required
from infrastructure.persistence.tables import mcp_integrations as table


def _to_entity(row: Any) -> McpIntegration:
    credentials = (
        SealedSecret(ciphertext=row.credentials_ciphertext, last4=row.credentials_last4 or "")
        if row.credentials_ciphertext
        else None
    )
    return McpIntegration(
        id=IntegrationId(row.id),
        org_id=OrgId(row.org_id),
        name=row.name,
        slug=row.slug,
        transport=Transport(row.transport),
        url=row.url,
        server=row.server,
        auth_type=AuthType(row.auth_type),
        auth_header_name=row.auth_header_name,
        credentials=credentials,
        tool_filter=ToolFilter(mode=FilterMode(row.tool_filter_mode), names=tuple(row.tool_filter_names)),
        timeout_seconds=row.timeout_seconds,
        enabled=row.enabled,
        connection_status=ConnectionStatus(row.connection_status),
        last_error=row.last_error,
        last_checked_at=utc(row.last_checked_at),
        created_at=utc_required(row.created_at),
        updated_at=utc_required(row.updated_at),
    )


def _values(integration: McpIntegration) -> dict[str, Any]:
    return {
        "name": integration.name,
        "slug": integration.slug,
        "transport": integration.transport.value,
        "url": integration.url,
        "server": integration.server,
        "auth_type": integration.auth_type.value,
        "auth_header_name": integration.auth_header_name,
        "credentials_ciphertext": integration.credentials.ciphertext if integration.credentials else None,
        "credentials_last4": integration.credentials.last4 if integration.credentials else None,
        "tool_filter_mode": integration.tool_filter.mode.value,
        "tool_filter_names": list(integration.tool_filter.names),
        "timeout_seconds": integration.timeout_seconds,
        "enabled": integration.enabled,
        "connection_status": integration.connection_status.value,
        "last_error": integration.last_error,
        "last_checked_at": integration.last_checked_at,
        "updated_at": integration.updated_at,
    }


_GET = select(table).where(table.c.org_id == bindparam("p_org"), table.c.id == bindparam("p_id"))
_GET_MANY = (
    select(table)
    .where(table.c.org_id == bindparam("p_org"), table.c.id.in_(bindparam("p_ids", expanding=True)))
    .order_by(table.c.id)
)


class SqlMcpIntegrationRepository:
    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def add(self, integration: McpIntegration) -> None:
        values = _values(integration) | {
            "id": integration.id,
            "org_id": integration.org_id,
            "created_at": integration.created_at,
        }
        await self._write(insert(table).values(**values), integration.slug)

    async def get(self, org_id: OrgId, integration_id: IntegrationId) -> McpIntegration | None:
        row = (await self._conn.execute(_GET, {"p_org": org_id, "p_id": integration_id})).first()
        return _to_entity(row) if row else None

    async def list(self, org_id: OrgId, *, limit: int, after: IntegrationId | None) -> Sequence[McpIntegration]:
        query = select(table).where(table.c.org_id == org_id).order_by(table.c.id).limit(limit)
        if after is not None:
            query = query.where(table.c.id > after)
        return [_to_entity(row) for row in await self._conn.execute(query)]

    async def get_many(self, org_id: OrgId, ids: Sequence[IntegrationId]) -> Sequence[McpIntegration]:
        if not ids:
            return []
        return [_to_entity(row) for row in await self._conn.execute(_GET_MANY, {"p_org": org_id, "p_ids": list(ids)})]

    async def save(self, integration: McpIntegration) -> None:
        query = (
            update(table)
            .where(table.c.org_id == integration.org_id, table.c.id == integration.id)
            .values(**_values(integration))
        )
        await self._write(query, integration.slug)

    async def delete(self, org_id: OrgId, integration_id: IntegrationId) -> None:
        await self._conn.execute(delete(table).where(table.c.org_id == org_id, table.c.id == integration_id))

    async def all_sealed_credentials(self) -> Sequence[tuple[OrgId, IntegrationId, str]]:
        query = select(table.c.org_id, table.c.id, table.c.credentials_ciphertext).where(
            table.c.credentials_ciphertext.is_not(None)
        )
        return [
            (OrgId(r.org_id), IntegrationId(r.id), r.credentials_ciphertext) for r in await self._conn.execute(query)
        ]

    async def replace_ciphertext(self, org_id: OrgId, integration_id: IntegrationId, ciphertext: str) -> None:
        await self._conn.execute(
            update(table)
            .where(table.c.org_id == org_id, table.c.id == integration_id)
            .values(credentials_ciphertext=ciphertext)
        )

    async def _write(self, statement: Any, slug: str) -> None:
        try:
            await self._conn.execute(statement)
        except IntegrityError as error:
            raise refused(error, slug) from None
