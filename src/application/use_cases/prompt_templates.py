"""Prompt templates over the REST API: an organization's own, and those of the prompts directory."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from application.audit import record_admin_action, template_fields
from application.caller import Caller
from application.errors import Conflict, InvalidReference, PromptTemplateNotFound
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock
from application.ports.template_files import TemplateFiles
from domain.audit import AuditAction, changes_between, created, deleted
from domain.ids import AgentId, OrgId
from domain.mcp_prompts import PromptMessage
from domain.prompt_templates import ArgumentValue, PromptTemplate, TemplateArgument, TemplateMessage


@dataclass(frozen=True, kw_only=True)
class TemplateView:
    template: PromptTemplate
    agent_slug: str | None = None
    """For file templates: the agent the file names."""

    @property
    def from_file(self) -> bool:
        return self.template.origin != "api"


async def find_template(uow: UnitOfWork, files: TemplateFiles, org_id: OrgId, name: str) -> TemplateView | None:
    stored = await uow.prompt_templates.get(org_id, name)
    if stored is not None:
        return TemplateView(template=stored)
    return next(
        (
            TemplateView(template=f.template, agent_slug=f.agent_slug)
            for f in await files.for_org(org_id)
            if f.template.name == name
        ),
        None,
    )


async def all_templates(uow: UnitOfWork, files: TemplateFiles, org_id: OrgId) -> list[TemplateView]:
    stored = [TemplateView(template=t) for t in await uow.prompt_templates.list(org_id)]
    names = {v.template.name for v in stored}
    from_files = [
        TemplateView(template=f.template, agent_slug=f.agent_slug)
        for f in await files.for_org(org_id)
        if f.template.name not in names
    ]
    return sorted(stored + from_files, key=lambda v: v.template.name)


async def _check_names(
    uow: UnitOfWork, files: TemplateFiles, template: PromptTemplate, org_id: OrgId, previous: str | None
) -> None:
    """A template's MCP names (its name as a prompt, its tool name) must be its own."""
    for other in await all_templates(uow, files, org_id):
        if other.template.name in (previous, template.name) and not other.from_file:
            continue  # itself, or a stored template of the same name (the repository refuses that)
        if other.template.tool_name == template.tool_name or other.template.name == template.name:
            where = "the prompts directory" if other.from_file else "another template"
            raise Conflict(f"{where} already publishes {template.tool_name!r} ({other.template.name!r})")
    for name in {template.name, template.tool_name}:
        if await uow.agents.get_by_slug(org_id, name) is not None:
            raise Conflict(f"template name {template.name!r} collides with the agent slug {name!r} over MCP")


@dataclass(frozen=True, kw_only=True)
class SaveTemplateCommand:
    caller: Caller
    name: str
    description: str
    messages: Sequence[TemplateMessage]
    arguments: Sequence[TemplateArgument] = ()
    agent_id: AgentId


class CreatePromptTemplate:
    def __init__(self, uow: UnitOfWork, clock: Clock, files: TemplateFiles) -> None:
        self._uow, self._clock, self._files = uow, clock, files

    async def execute(self, command: SaveTemplateCommand) -> PromptTemplate:
        command.caller.require_admin("manage prompt templates")
        now = self._clock.now()
        template = PromptTemplate(
            org_id=command.caller.org_id,
            name=command.name,
            description=command.description,
            messages=tuple(command.messages),
            arguments=tuple(command.arguments),
            agent_id=command.agent_id,
            created_at=now,
            updated_at=now,
        )
        async with self._uow as uow:
            if await uow.agents.get(command.caller.org_id, command.agent_id) is None:
                raise InvalidReference(f"agent {command.agent_id} not found")
            await _check_names(uow, self._files, template, command.caller.org_id, None)
            await uow.prompt_templates.add(template)
            changes = created(template_fields(template))
            await record_admin_action(
                uow, command.caller, AuditAction.PROMPT_TEMPLATE_CREATED, template.name, changes, at=now
            )
            await uow.commit()
        return template


@dataclass(frozen=True, kw_only=True)
class TemplateChanges:
    name: str | None = None
    description: str | None = None
    messages: Sequence[TemplateMessage] | None = None
    arguments: Sequence[TemplateArgument] | None = None
    agent_id: AgentId | None = None


class UpdatePromptTemplate:
    def __init__(self, uow: UnitOfWork, clock: Clock, files: TemplateFiles) -> None:
        self._uow, self._clock, self._files = uow, clock, files

    async def execute(self, caller: Caller, name: str, changes: TemplateChanges) -> PromptTemplate:
        caller.require_admin("manage prompt templates")
        async with self._uow as uow:
            current = await uow.prompt_templates.get(caller.org_id, name)
            if current is None:
                if any(f.template.name == name for f in await self._files.for_org(caller.org_id)):
                    raise Conflict(f"template {name!r} comes from the prompts directory: change its file")
                raise PromptTemplateNotFound(f"prompt template {name!r} not found")
            updates = {k: v for k, v in changes.__dict__.items() if v is not None}
            for key in ("messages", "arguments"):
                if key in updates:
                    updates[key] = tuple(updates[key])
            now = self._clock.now()
            template = replace(current, **updates, updated_at=now)
            if changes.agent_id is not None and await uow.agents.get(caller.org_id, changes.agent_id) is None:
                raise InvalidReference(f"agent {changes.agent_id} not found")
            await _check_names(uow, self._files, template, caller.org_id, name)
            await uow.prompt_templates.save(template, previous_name=name)
            audited = changes_between(template_fields(current), template_fields(template))
            await record_admin_action(uow, caller, AuditAction.PROMPT_TEMPLATE_UPDATED, template.name, audited, at=now)
            await uow.commit()
        return template


class DeletePromptTemplate:
    def __init__(self, uow: UnitOfWork, clock: Clock, files: TemplateFiles) -> None:
        self._uow, self._clock, self._files = uow, clock, files

    async def execute(self, caller: Caller, name: str) -> None:
        caller.require_admin("manage prompt templates")
        async with self._uow as uow:
            current = await uow.prompt_templates.get(caller.org_id, name)
            if current is None:
                if any(f.template.name == name for f in await self._files.for_org(caller.org_id)):
                    raise Conflict(f"template {name!r} comes from the prompts directory: delete its file")
                raise PromptTemplateNotFound(f"prompt template {name!r} not found")
            await uow.prompt_templates.delete(caller.org_id, name)
            changes = deleted(template_fields(current))
            await record_admin_action(
                uow, caller, AuditAction.PROMPT_TEMPLATE_DELETED, name, changes, at=self._clock.now()
            )
            await uow.commit()


class ListPromptTemplates:
    def __init__(self, uow: UnitOfWork, files: TemplateFiles) -> None:
        self._uow, self._files = uow, files

    async def execute(self, caller: Caller) -> list[TemplateView]:
        async with self._uow.read_only() as uow:
            return await all_templates(uow, self._files, caller.org_id)


class GetPromptTemplate:
    def __init__(self, uow: UnitOfWork, files: TemplateFiles) -> None:
        self._uow, self._files = uow, files

    async def execute(self, caller: Caller, name: str) -> TemplateView:
        async with self._uow.read_only() as uow:
            found = await find_template(uow, self._files, caller.org_id, name)
        if found is None:
            raise PromptTemplateNotFound(f"prompt template {name!r} not found")
        return found


@dataclass(frozen=True, kw_only=True)
class RenderCommand:
    caller: Caller
    name: str
    arguments: Mapping[str, ArgumentValue] = field(default_factory=dict)


class RenderPromptTemplate:
    """The template's messages with the arguments substituted (a missing required one is refused)."""

    def __init__(self, uow: UnitOfWork, files: TemplateFiles) -> None:
        self._uow, self._files = uow, files

    async def execute(self, command: RenderCommand) -> tuple[PromptMessage, ...]:
        async with self._uow.read_only() as uow:
            found = await find_template(uow, self._files, command.caller.org_id, command.name)
        if found is None:
            raise PromptTemplateNotFound(f"prompt template {command.name!r} not found")
        return found.template.render(command.arguments)


@dataclass(frozen=True, kw_only=True)
class RenderDraftCommand:
    caller: Caller
    messages: Sequence[TemplateMessage]
    template_arguments: Sequence[TemplateArgument] = ()
    arguments: Mapping[str, ArgumentValue] = field(default_factory=dict)


class RenderDraftTemplate:
    """A template as it is being written, rendered without saving it: the same checks and substitution
    as a saved template's render, so a preview shows what saving would publish."""

    DRAFT_NAME = "draft"

    async def execute(self, command: RenderDraftCommand) -> tuple[PromptMessage, ...]:
        draft = PromptTemplate(
            name=self.DRAFT_NAME,
            description="",
            messages=tuple(command.messages),
            arguments=tuple(command.template_arguments),
            org_id=command.caller.org_id,
        )
        return draft.render(command.arguments)
