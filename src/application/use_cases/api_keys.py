from dataclasses import dataclass
from datetime import timedelta

from application.caller import Caller
from application.errors import ApiKeyNotFound, NotAuthenticated
from application.pagination import Page, PageRequest, decode_id_cursor, page_of
from application.ports.persistence import UnitOfWork
from application.ports.security import KeyHasher
from application.ports.system import Clock, IdGenerator
from domain.api_keys import ApiKey, Role
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
    def __init__(self, uow: UnitOfWork, clock: Clock) -> None:
        self._uow, self._clock = uow, clock

    async def execute(self, caller: Caller, key_id: ApiKeyId) -> ApiKey:
        caller.require_admin("revoke API keys")
        async with self._uow as uow:
            key = await uow.api_keys.get(caller.org_id, key_id)
            if key is None:
                raise ApiKeyNotFound(f"API key {key_id} not found")
            key.revoke(self._clock.now())
            await uow.api_keys.save(key)
            await uow.commit()
        return key


class AuthenticateApiKey:
    """Turns a presented bearer token into a Caller, or refuses it."""

    def __init__(self, uow: UnitOfWork, clock: Clock, hasher: KeyHasher, touch_interval: timedelta) -> None:
        self._uow, self._clock, self._hasher, self._touch_interval = uow, clock, hasher, touch_interval

    async def execute(self, presented: str | None) -> Caller:
        prefix = self._hasher.prefix_of(presented) if presented else None
        if presented is None or prefix is None:
            raise NotAuthenticated("a valid API key is required (Authorization: Bearer <key>)")
        async with self._uow.read_only() as uow:
            key = await uow.api_keys.find_by_prefix(prefix)
        if key is None or not key.is_active or not self._hasher.verify(presented, key.secret_hash):
            raise NotAuthenticated("the API key is unknown or revoked")
        if key.record_use(self._clock.now(), granularity=self._touch_interval):
            async with self._uow as uow:
                await uow.api_keys.touch(key)
                await uow.commit()
        return Caller(org_id=key.org_id, role=key.role, api_key_id=key.id)
