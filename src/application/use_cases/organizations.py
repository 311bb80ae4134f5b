from dataclasses import dataclass

from application.audit import plain, record_admin_action
from application.caller import Caller
from application.errors import OrganizationNotFound, SlugTaken
from application.ports.persistence import UnitOfWork
from application.ports.security import KeyHasher
from application.ports.system import Clock, IdGenerator
from domain.api_keys import ApiKey, Role
from domain.audit import AuditAction, changes_between, created
from domain.ids import ApiKeyId, OrgId
from domain.organizations import ORG_NAME_MAX, Organization
from domain.text import require_name, slugify


@dataclass(frozen=True, kw_only=True)
class CreateOrganizationCommand:
    name: str
    slug: str | None = None


@dataclass(frozen=True, kw_only=True)
class CreatedOrganization:
    organization: Organization
    admin_key: ApiKey
    admin_key_plaintext: str


class CreateOrganization:
    """Creates a tenant with its first admin key, whose secret is returned this once."""

    def __init__(self, uow: UnitOfWork, clock: Clock, ids: IdGenerator, hasher: KeyHasher) -> None:
        self._uow, self._clock, self._ids, self._hasher = uow, clock, ids, hasher

    async def execute(self, command: CreateOrganizationCommand) -> CreatedOrganization:
        # Unlike agents and integrations, a derived slug that is taken is not numbered: an operator who
        # creates a second organization of the same name is told, not given a look-alike tenant.
        require_name("name", command.name, max_length=ORG_NAME_MAX)
        now = self._clock.now()
        org = Organization(
            id=OrgId(self._ids.new()), name=command.name, slug=command.slug or slugify(command.name), created_at=now
        )
        minted = self._hasher.mint()
        key = ApiKey(
            id=ApiKeyId(self._ids.new()),
            org_id=org.id,
            name="first admin key",
            role=Role.ADMIN,
            prefix=minted.prefix,
            secret_hash=minted.secret_hash,
            created_at=now,
        )
        async with self._uow as uow:
            if await uow.organizations.get_by_slug(org.slug) is not None:
                raise SlugTaken(f"an organization with slug {org.slug!r} already exists")
            await uow.organizations.add(org)
            await uow.api_keys.add(key)
            # The operator's act, the first event of the organization's log (the key's secret is not in it).
            first_key = {"first_admin_key_id": key.id, "first_admin_key_name": key.name}
            after = {"name": org.name, "slug": org.slug, **first_key}
            changes = created({name: plain(value) for name, value in after.items()})
            await record_admin_action(
                uow, Caller.operator(org.id), AuditAction.ORGANIZATION_CREATED, org.id, changes, at=now
            )
            await uow.commit()
        return CreatedOrganization(organization=org, admin_key=key, admin_key_plaintext=minted.plaintext)


class FindOrganization:
    """The organization with a slug; used by the operator's command line."""

    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, slug: str) -> Organization:
        async with self._uow.read_only() as uow:
            org = await uow.organizations.get_by_slug(slug)
        if org is None:
            raise OrganizationNotFound(f"no organization with slug {slug!r}")
        return org


@dataclass(frozen=True, kw_only=True)
class Me:
    organization: Organization
    api_key: ApiKey | None
    role: Role


class GetMe:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller) -> Me:
        async with self._uow.read_only() as uow:
            org = await uow.organizations.get(caller.org_id)
            key = await uow.api_keys.get(caller.org_id, caller.api_key_id) if caller.api_key_id else None
        if org is None:
            raise OrganizationNotFound("the organization no longer exists")
        return Me(organization=org, api_key=key, role=caller.role)


@dataclass(frozen=True, kw_only=True)
class SetOrganizationLimitsCommand:
    slug: str
    max_concurrent_runs: int | None
    runs_per_minute: int | None


class SetOrganizationLimits:
    """The operator gives an organization limits of its own (None: the deployment's); the audit log tells."""

    def __init__(self, uow: UnitOfWork, clock: Clock) -> None:
        self._uow, self._clock = uow, clock

    async def execute(self, command: SetOrganizationLimitsCommand) -> Organization:
        async with self._uow as uow:
            org = await uow.organizations.get_by_slug(command.slug)
            if org is None:
                raise OrganizationNotFound(f"no organization with slug {command.slug!r}")
            before = _limits(org)
            org.set_limits(max_concurrent_runs=command.max_concurrent_runs, runs_per_minute=command.runs_per_minute)
            changes = changes_between(before, _limits(org))
            if changes:
                await uow.organizations.save_limits(org)
                operator = Caller.operator(org.id)
                await record_admin_action(
                    uow, operator, AuditAction.LIMITS_CHANGED, org.id, changes, at=self._clock.now()
                )
                await uow.commit()
        return org


def _limits(org: Organization) -> dict[str, int | None]:
    return {"max_concurrent_runs": org.max_concurrent_runs, "runs_per_minute": org.runs_per_minute}


@dataclass(frozen=True, kw_only=True)
class UpdateOrganizationCommand:
    caller: Caller
    search_language: str | None = None
    """None: kept"""


class UpdateOrganization:
    """An admin (or the operator) changes the organization's settings: the language its sources are searched in
    (its passages are indexed again in it in the same transaction, so searches read one language or the other,
    never a mix). The audit log tells."""

    def __init__(self, uow: UnitOfWork, clock: Clock) -> None:
        self._uow, self._clock = uow, clock

    async def execute(self, command: UpdateOrganizationCommand) -> Organization:
        command.caller.require_admin("change the organization's settings")
        async with self._uow as uow:
            org = await uow.organizations.get(command.caller.org_id)
            if org is None:
                raise OrganizationNotFound("the organization no longer exists")
            before = org.search_language
            if command.search_language is not None:
                org.set_search_language(command.search_language)
            if org.search_language != before:
                await uow.organizations.save_search_language(org)
                await uow.passages.language_changed(org.id)
                changes = changes_between({"search_language": before}, {"search_language": org.search_language})
                await record_admin_action(
                    uow, command.caller, AuditAction.SEARCH_LANGUAGE_CHANGED, org.id, changes, at=self._clock.now()
                )
                await uow.commit()
        return org
