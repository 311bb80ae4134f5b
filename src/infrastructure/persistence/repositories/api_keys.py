from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, func, insert, select, update

from domain.api_keys import ApiKey, Role
from domain.ids import ApiKeyId, OrgId
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.repositories._rows import utc, utc_required
from infrastructure.persistence.tables import api_keys
from infrastructure.security.key_revocations import CHANNEL, revoked_notice


def _to_entity(row: Any) -> ApiKey:
    return ApiKey(
        id=ApiKeyId(row.id),
        org_id=OrgId(row.org_id),
        name=row.name,
        role=Role(row.role),
        prefix=row.prefix,
        secret_hash=row.secret_hash,
        created_at=utc_required(row.created_at),
        revoked_at=utc(row.revoked_at),
        last_used_at=utc(row.last_used_at),
    )


_BY_PREFIX = select(api_keys).where(api_keys.c.prefix == bindparam("p_prefix"))


class SqlApiKeyRepository:
    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def add(self, key: ApiKey) -> None:
        await self._conn.execute(
            insert(api_keys).values(
                id=key.id,
                org_id=key.org_id,
                name=key.name,
                role=key.role.value,
                prefix=key.prefix,
                secret_hash=key.secret_hash,
                created_at=key.created_at,
                revoked_at=key.revoked_at,
                last_used_at=key.last_used_at,
            )
        )

    async def get(self, org_id: OrgId, key_id: ApiKeyId) -> ApiKey | None:
        query = select(api_keys).where(api_keys.c.org_id == org_id, api_keys.c.id == key_id)
        row = (await self._conn.execute(query)).first()
        return _to_entity(row) if row else None

    async def find_by_prefix(self, prefix: str) -> ApiKey | None:
        row = (await self._conn.execute(_BY_PREFIX, {"p_prefix": prefix})).first()
        return _to_entity(row) if row else None

    async def list(self, org_id: OrgId, *, limit: int, after: ApiKeyId | None) -> Sequence[ApiKey]:
        query = select(api_keys).where(api_keys.c.org_id == org_id).order_by(api_keys.c.id).limit(limit)
        if after is not None:
            query = query.where(api_keys.c.id > after)
        return [_to_entity(row) for row in await self._conn.execute(query)]

    async def save(self, key: ApiKey) -> None:
        await self._conn.execute(
            update(api_keys)
            .where(api_keys.c.org_id == key.org_id, api_keys.c.id == key.id)
            .values(name=key.name, revoked_at=key.revoked_at, last_used_at=key.last_used_at)
        )
        if key.revoked_at is not None and self._conn.dialect.name == "postgresql":
            # Every process forgets the key among its verified keys as this commits (key_revocations.py).
            await self._conn.execute(select(func.pg_notify(CHANNEL, revoked_notice(key.id))))

    async def touch(self, key: ApiKey) -> None:
        await self._conn.execute(
            update(api_keys)
            .where(api_keys.c.org_id == key.org_id, api_keys.c.id == key.id)
            .values(last_used_at=key.last_used_at)
        )
