"""Integrations' OAuth grants, each method one short transaction of its own (a refresh may happen in the
middle of any MCP request, outside whatever unit of work the caller holds)."""

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from domain.ids import ApiKeyId, IntegrationId, OrgId
from domain.oauth_grants import OAuthGrant, PendingAuthorization
from infrastructure.persistence.engine import READ_ONLY, Database
from infrastructure.persistence.errors import translating
from infrastructure.persistence.repositories._rows import utc, utc_required
from infrastructure.persistence.tables import mcp_oauth_grants as table


def _to_grant(row: Any) -> OAuthGrant:
    pending = None
    if row.pending_state_digest is not None:
        pending = PendingAuthorization(
            state_digest=row.pending_state_digest,
            api_key_id=ApiKeyId(row.pending_api_key_id),
            code_verifier=row.pending_verifier_ciphertext,
            redirect_uri=row.pending_redirect_uri,
            expires_at=utc_required(row.pending_expires_at),
        )
    return OAuthGrant(
        org_id=OrgId(row.org_id),
        integration_id=IntegrationId(row.integration_id),
        registration=row.registration_ciphertext,
        tokens=row.tokens_ciphertext,
        expires_at=utc(row.expires_at),
        pending=pending,
        updated_at=utc_required(row.updated_at),
    )


def _values(grant: OAuthGrant) -> dict[str, Any]:
    pending = grant.pending
    return {
        "registration_ciphertext": grant.registration,
        "tokens_ciphertext": grant.tokens,
        "expires_at": grant.expires_at,
        "pending_state_digest": pending.state_digest if pending else None,
        "pending_api_key_id": pending.api_key_id if pending else None,
        "pending_verifier_ciphertext": pending.code_verifier if pending else None,
        "pending_redirect_uri": pending.redirect_uri if pending else None,
        "pending_expires_at": pending.expires_at if pending else None,
        "updated_at": grant.updated_at,
    }


class SqlOAuthGrants:
    def __init__(self, database: Database) -> None:
        self._database = database

    @contextlib.asynccontextmanager
    async def _transaction(self, *, writing: bool) -> AsyncIterator[AsyncConnection]:
        with translating():
            async with contextlib.AsyncExitStack() as stack:
                if writing:
                    await stack.enter_async_context(self._database.writing())
                connection = await stack.enter_async_context(self._database.engine.connect())
                if not writing:
                    await connection.execution_options(**{READ_ONLY: True})
                async with connection.begin():
                    yield connection

    async def get(self, org_id: OrgId | None, integration_id: IntegrationId) -> OAuthGrant | None:
        query = select(table).where(table.c.integration_id == integration_id)
        if org_id is not None:
            query = query.where(table.c.org_id == org_id)
        async with self._transaction(writing=False) as connection:
            row = (await connection.execute(query)).first()
        return _to_grant(row) if row else None

    async def save(self, grant: OAuthGrant) -> None:
        where = (table.c.integration_id == grant.integration_id, table.c.org_id == grant.org_id)
        async with self._transaction(writing=True) as connection:
            changed = await connection.execute(update(table).where(*where).values(**_values(grant)))
            if changed.rowcount == 0:
                row = {"integration_id": grant.integration_id, "org_id": grant.org_id}
                await connection.execute(insert(table).values(**row, **_values(grant)))

    async def reseal(self, rotate: Callable[[str], str]) -> int:
        sealed = (table.c.registration_ciphertext, table.c.tokens_ciphertext, table.c.pending_verifier_ciphertext)
        async with self._transaction(writing=True) as connection:
            rows = (await connection.execute(select(table.c.integration_id, *sealed))).all()
            for row in rows:
                values = {c.name: rotate(getattr(row, c.name)) for c in sealed if getattr(row, c.name) is not None}
                if values:
                    await connection.execute(
                        update(table).where(table.c.integration_id == row.integration_id).values(**values)
                    )
        return len(rows)

    async def replace_tokens(self, grant: OAuthGrant, *, expected: str | None) -> bool:
        current = table.c.tokens_ciphertext
        query = (
            update(table)
            .where(
                table.c.integration_id == grant.integration_id,
                table.c.org_id == grant.org_id,
                current.is_(None) if expected is None else current == expected,
            )
            .values(tokens_ciphertext=grant.tokens, expires_at=grant.expires_at, updated_at=grant.updated_at)
        )
        async with self._transaction(writing=True) as connection:
            return (await connection.execute(query)).rowcount == 1
