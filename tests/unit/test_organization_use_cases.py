"""Organizations and their API keys on fakes: creating a tenant, who may manage keys, and how a key authenticates."""

from datetime import timedelta

import pytest

from application.caller import Caller
from application.errors import ApiKeyNotFound, NotAuthenticated, OrganizationNotFound, PermissionDenied, SlugTaken
from application.pagination import PageRequest
from application.use_cases.api_keys import (
    AuthenticateApiKey,
    CreateApiKey,
    CreateApiKeyCommand,
    ListApiKeys,
    RevokeApiKey,
)
from application.use_cases.organizations import CreateOrganization, CreateOrganizationCommand, FindOrganization, GetMe
from domain.api_keys import ApiKey, Role
from domain.errors import InvalidValue
from domain.ids import ApiKeyId
from domain.organizations import Organization
from infrastructure.security.verified_keys import VerifiedKeyCache
from tests import builders
from tests.unit.fakes.app import FakeApp, admin, member
from tests.unit.fakes.ports import NOW

TOUCH_EVERY = timedelta(minutes=5)


@pytest.fixture
def app() -> FakeApp:
    return FakeApp()


def create_organization(app: FakeApp) -> CreateOrganization:
    return CreateOrganization(app.uow, app.clock, app.ids, app.hasher)


@pytest.fixture
def verified() -> VerifiedKeyCache:
    return VerifiedKeyCache(ttl_seconds=60, trusted=True)


def authenticate(app: FakeApp, verified: VerifiedKeyCache) -> AuthenticateApiKey:
    return AuthenticateApiKey(app.uow, app.clock, app.hasher, TOUCH_EVERY, verified)


async def issue(app: FakeApp, org: Organization, role: Role = Role.MEMBER, name: str = "ci") -> tuple[ApiKey, str]:
    issued = await CreateApiKey(app.uow, app.clock, app.ids, app.hasher).execute(
        CreateApiKeyCommand(caller=admin(org), name=name, role=role)
    )
    return issued.api_key, issued.plaintext


async def stored_key(app: FakeApp, key: ApiKey) -> ApiKey:
    async with app.uow.read_only() as uow:
        found = await uow.api_keys.get(key.org_id, key.id)
    assert found is not None
    return found


# -- CreateOrganization, FindOrganization, GetMe ----------------------------------------------------------


async def test_an_organization_is_created_with_a_slug_from_its_name_and_a_first_admin_key(
    app: FakeApp, verified: VerifiedKeyCache
) -> None:
    created = await create_organization(app).execute(CreateOrganizationCommand(name="Acme Widgets"))
    assert created.organization.slug == "acme-widgets"
    assert (created.admin_key.role, created.admin_key.org_id) == (Role.ADMIN, created.organization.id)
    assert app.store.organizations == {created.organization.id: created.organization}
    assert list(app.store.api_keys.values()) == [created.admin_key]
    caller = await authenticate(app, verified).execute(created.admin_key_plaintext)
    assert (caller.org_id, caller.role) == (created.organization.id, Role.ADMIN)


async def test_the_secret_of_the_first_key_is_not_stored(app: FakeApp) -> None:
    created = await create_organization(app).execute(CreateOrganizationCommand(name="Acme"))
    stored = app.store.api_keys[created.admin_key.id]
    assert created.admin_key_plaintext not in (stored.secret_hash, stored.prefix)


async def test_a_slug_that_is_taken_is_refused_and_nothing_is_stored(app: FakeApp) -> None:
    await create_organization(app).execute(CreateOrganizationCommand(name="Acme", slug="acme"))
    with pytest.raises(SlugTaken):
        await create_organization(app).execute(CreateOrganizationCommand(name="Other", slug="acme"))
    assert len(app.store.organizations) == 1 and len(app.store.api_keys) == 1


async def test_an_invalid_slug_is_refused(app: FakeApp) -> None:
    with pytest.raises(InvalidValue, match="slug"):
        await create_organization(app).execute(CreateOrganizationCommand(name="Acme", slug="Not A Slug"))
    assert app.store.organizations == {}


async def test_an_organization_is_found_by_its_slug(app: FakeApp) -> None:
    org = await app.organization()
    assert await FindOrganization(app.uow).execute(org.slug) == org
    with pytest.raises(OrganizationNotFound, match="no organization with slug 'nope'"):
        await FindOrganization(app.uow).execute("nope")


async def test_me_is_the_callers_organization_key_and_role(app: FakeApp) -> None:
    org = await app.organization()
    key, _ = await issue(app, org)
    me = await GetMe(app.uow).execute(Caller(org_id=org.id, role=Role.MEMBER, api_key_id=key.id))
    assert (me.organization, me.api_key, me.role) == (org, key, Role.MEMBER)


async def test_me_of_the_operator_has_no_key(app: FakeApp) -> None:
    org = await app.organization()
    me = await GetMe(app.uow).execute(Caller.operator(org.id))
    assert me.api_key is None and me.role is Role.ADMIN


async def test_me_of_an_organization_that_is_gone_is_not_found(app: FakeApp) -> None:
    with pytest.raises(OrganizationNotFound):
        await GetMe(app.uow).execute(member(builders.organization()))


# -- CreateApiKey, ListApiKeys, RevokeApiKey --------------------------------------------------------------


async def test_an_admin_creates_a_key_whose_secret_is_shown_once(app: FakeApp) -> None:
    org = await app.organization()
    key, plaintext = await issue(app, org, Role.MEMBER, name="deploy bot")
    assert (key.name, key.role, key.org_id, key.created_at) == ("deploy bot", Role.MEMBER, org.id, NOW)
    assert app.store.api_keys[key.id] == key and plaintext not in (key.secret_hash, key.prefix)


async def test_a_member_may_not_create_list_or_revoke_keys(app: FakeApp, verified: VerifiedKeyCache) -> None:
    org = await app.organization()
    key, _ = await issue(app, org)
    with pytest.raises(PermissionDenied, match="only admins may create API keys"):
        await CreateApiKey(app.uow, app.clock, app.ids, app.hasher).execute(
            CreateApiKeyCommand(caller=member(org), name="x", role=Role.ADMIN)
        )
    with pytest.raises(PermissionDenied):
        await ListApiKeys(app.uow).execute(member(org), PageRequest())
    with pytest.raises(PermissionDenied):
        await RevokeApiKey(app.uow, app.clock, verified).execute(member(org), key.id)
    assert len(app.store.api_keys) == 1 and (await stored_key(app, key)).is_active


async def test_keys_are_listed_page_by_page_within_the_organization(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    keys = [(await issue(app, org, name=f"k{n}"))[0] for n in range(3)]
    await issue(app, other)
    first = await ListApiKeys(app.uow).execute(admin(org), PageRequest(limit=2))
    assert [k.id for k in first.items] == [k.id for k in keys[:2]] and first.next_cursor is not None
    second = await ListApiKeys(app.uow).execute(admin(org), PageRequest(limit=2, cursor=first.next_cursor))
    assert [k.id for k in second.items] == [keys[2].id] and second.next_cursor is None


async def test_a_revoked_key_keeps_its_first_revocation_time(app: FakeApp, verified: VerifiedKeyCache) -> None:
    org = await app.organization()
    key, _ = await issue(app, org)
    revoked = await RevokeApiKey(app.uow, app.clock, verified).execute(admin(org), key.id)
    app.clock.advance(60)
    again = await RevokeApiKey(app.uow, app.clock, verified).execute(admin(org), key.id)
    assert revoked.revoked_at == again.revoked_at == NOW
    assert (await stored_key(app, key)).revoked_at == NOW


async def test_another_organizations_key_cannot_be_revoked(app: FakeApp, verified: VerifiedKeyCache) -> None:
    org, other = await app.organization(), await app.organization()
    key, _ = await issue(app, other)
    with pytest.raises(ApiKeyNotFound):
        await RevokeApiKey(app.uow, app.clock, verified).execute(admin(org), key.id)
    with pytest.raises(ApiKeyNotFound):
        await RevokeApiKey(app.uow, app.clock, verified).execute(admin(org), ApiKeyId(app.ids.new()))
    assert (await stored_key(app, key)).is_active


# -- AuthenticateApiKey ---------------------------------------------------------------------------------


async def test_a_valid_key_becomes_a_caller_of_its_organization_with_its_role(
    app: FakeApp, verified: VerifiedKeyCache
) -> None:
    org = await app.organization()
    key, plaintext = await issue(app, org, Role.MEMBER)
    caller = await authenticate(app, verified).execute(plaintext)
    assert caller == Caller(org_id=org.id, role=Role.MEMBER, api_key_id=key.id)


@pytest.mark.parametrize("presented", [None, "", "not-our-format", "key-99"])
async def test_a_missing_malformed_or_unknown_key_is_refused(
    app: FakeApp, verified: VerifiedKeyCache, presented: str | None
) -> None:
    await issue(app, await app.organization())
    with pytest.raises(NotAuthenticated):
        await authenticate(app, verified).execute(presented)


async def test_a_key_with_the_right_prefix_but_the_wrong_secret_is_refused(
    app: FakeApp, verified: VerifiedKeyCache
) -> None:
    org = await app.organization()
    key, plaintext = await issue(app, org)
    async with app.uow as uow:
        stored = await uow.api_keys.get(org.id, key.id)
        assert stored is not None
        stored.secret_hash = "hash:something-else"
        await uow.api_keys.save(stored)
        await uow.commit()
    with pytest.raises(NotAuthenticated, match="unknown or revoked"):
        await authenticate(app, verified).execute(plaintext)


async def test_a_revoked_key_is_refused(app: FakeApp, verified: VerifiedKeyCache) -> None:
    org = await app.organization()
    key, plaintext = await issue(app, org)
    await RevokeApiKey(app.uow, app.clock, verified).execute(admin(org), key.id)
    with pytest.raises(NotAuthenticated, match="unknown or revoked"):
        await authenticate(app, verified).execute(plaintext)


async def test_last_use_is_written_at_most_once_per_interval(app: FakeApp, verified: VerifiedKeyCache) -> None:
    org = await app.organization()
    key, plaintext = await issue(app, org)
    await authenticate(app, verified).execute(plaintext)
    assert (await stored_key(app, key)).last_used_at == NOW
    writes = app.store.commits
    app.clock.advance(60)
    await authenticate(app, verified).execute(plaintext)
    assert (await stored_key(app, key)).last_used_at == NOW and app.store.commits == writes
    app.clock.advance(TOUCH_EVERY.total_seconds())
    await authenticate(app, verified).execute(plaintext)
    assert (await stored_key(app, key)).last_used_at == NOW + timedelta(seconds=60) + TOUCH_EVERY


async def test_a_key_verified_once_is_not_read_again(app: FakeApp, verified: VerifiedKeyCache) -> None:
    org = await app.organization()
    key, plaintext = await issue(app, org)
    await authenticate(app, verified).execute(plaintext)
    del app.store.api_keys[key.id]  # the next request does not look
    caller = await authenticate(app, verified).execute(plaintext)
    assert caller.api_key_id == key.id


async def test_a_verified_key_is_refused_on_the_request_after_its_revocation(
    app: FakeApp, verified: VerifiedKeyCache
) -> None:
    org = await app.organization()
    key, plaintext = await issue(app, org)
    await authenticate(app, verified).execute(plaintext)
    await RevokeApiKey(app.uow, app.clock, verified).execute(admin(org), key.id)
    with pytest.raises(NotAuthenticated, match="unknown or revoked"):
        await authenticate(app, verified).execute(plaintext)


async def test_refused_keys_are_not_kept(app: FakeApp, verified: VerifiedKeyCache) -> None:
    org = await app.organization()
    key, plaintext = await issue(app, org)
    for presented in [plaintext[:-1] + ("A" if plaintext[-1] != "A" else "B"), f"tl_{key.prefix}_{'x' * 43}"]:
        with pytest.raises(NotAuthenticated):
            await authenticate(app, verified).execute(presented)
    assert len(verified) == 0
