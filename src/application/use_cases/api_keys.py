from dataclasses import dataclass
from datetime import timedelta

from application.audit import api_key_fields, record_admin_action
from application.caller import Caller
from application.errors import ApiKeyNotFound, NotAuthenticated
from application.pagination import Page, PageRequest, decode_id_cursor, page_of
from application.ports.persistence import UnitOfWork
from application.ports.security import KeyHasher, VerifiedKeys
from application.ports.system import Clock, IdGenerator
from domain.api_keys import ApiKey, Role
from domain.audit import AuditAction, changes_between, created
from domain.ids import ApiKeyId


@dataclass(frozen=True, kw_only=True)
class CreateApiKeyCommand:
    caller: Caller
    name: str
    role: Role


@dataclass(frozen=True, kw_only=True)
class IssuedApiKey:
    api_key: ApiKey
    plaintext: str


class CreateApiKey:
    def __init__(self, uow: UnitOfWork, clock: Clock, ids: IdGenerator, hasher: KeyHasher) -> None:
        self._uow, self._clock, self._ids, self._hasher = uow, clock, ids, hasher

    async def execute(self, command: CreateApiKeyCommand) -> IssuedApiKey:
        command.caller.require_admin("create API keys")
        minted = self._hasher.mint()
        key = ApiKey(
            id=ApiKeyId(self._ids.new()),
            org_id=command.caller.org_id,
            name=command.name,
            role=command.role,
            prefix=minted.prefix,
            secret_hash=minted.secret_hash,
            created_at=self._clock.now(),
        )
        async with self._uow as uow:
            await uow.api_keys.add(key)
            await record_admin_action(
                uow,
                command.caller,
                AuditAction.API_KEY_CREATED,
                key.id,
                created(api_key_fields(key)),
                at=key.created_at,
            )
            await uow.commit()
        return IssuedApiKey(api_key=key, plaintext=minted.plaintext)


class ListApiKeys:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, page: PageRequest) -> Page[ApiKey]:
        caller.require_admin("list API keys")
        after = decode_id_cursor(page.cursor)
        async with self._uow.read_only() as uow:
            rows = await uow.api_keys.list(
                caller.org_id, limit=page.limit + 1, after=ApiKeyId(after) if after else None
            )
        return page_of(rows, page.limit, key=lambda k: str(k.id))


class RevokeApiKey:
    """Revokes a key: refused from the next request on, in this process and (through storage) in the others."""

    def __init__(self, uow: UnitOfWork, clock: Clock, verified: VerifiedKeys) -> None:
        self._uow, self._clock, self._verified = uow, clock, verified

    async def execute(self, caller: Caller, key_id: ApiKeyId) -> ApiKey:
        caller.require_admin("revoke API keys")
        async with self._uow as uow:
            key = await uow.api_keys.get(caller.org_id, key_id)
            if key is None:
                raise ApiKeyNotFound(f"API key {key_id} not found")
            before, now = api_key_fields(key), self._clock.now()
            key.revoke(now)
            await uow.api_keys.save(key)
            changes = changes_between(before, api_key_fields(key))
            await record_admin_action(uow, caller, AuditAction.API_KEY_REVOKED, key.id, changes, at=now)
            await uow.commit()
        self._verified.forget_key(key.id)
        return key


class AuthenticateApiKey:
    """Turns a presented bearer token into a Caller, or refuses it. A key verified lately is not read again."""

    def __init__(
        self, uow: UnitOfWork, clock: Clock, hasher: KeyHasher, touch_interval: timedelta, verified: VerifiedKeys
    ) -> None:
        self._uow, self._clock, self._hasher, self._touch_interval = uow, clock, hasher, touch_interval
        self._verified = verified

    async def execute(self, presented: str | None) -> Caller:
        prefix = self._hasher.prefix_of(presented) if presented else None
        if presented is None or prefix is None:
            raise NotAuthenticated("a valid API key is required (Authorization: Bearer <key>)")
        key = self._verified.get(presented) or await self._verify(presented, prefix)
        if key.record_use(self._clock.now(), granularity=self._touch_interval):
            async with self._uow as uow:
                await uow.api_keys.touch(key)
                await uow.commit()
        return Caller(org_id=key.org_id, role=key.role, api_key_id=key.id)

    async def _verify(self, presented: str, prefix: str) -> ApiKey:
        as_of = self._verified.version()
        async with self._uow.read_only() as uow:
            key = await uow.api_keys.find_by_prefix(prefix)
        if key is None or not key.is_active or not self._hasher.verify(presented, key.secret_hash):
            raise NotAuthenticated("the API key is unknown or revoked")
        self._verified.remember(presented, key, as_of=as_of)
        return key
