from collections.abc import Sequence
from dataclasses import dataclass, field

from application.audit import agent_fields, record_admin_action
from application.caller import Caller
from application.errors import AgentNotFound, InvalidReference
from application.pagination import Page, PageRequest, decode_id_cursor, page_of
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.ports.template_files import AgentFile, AgentFiles
from application.slugs import create_with_slug
from domain.agents import DEFAULT_MAX_STEPS, Agent, AgentChanges, ModelSettings
from domain.audit import AuditAction, changes_between, created, deleted
from domain.ids import AgentId, IntegrationId
from domain.native_tools import ToolRef


@dataclass(frozen=True, kw_only=True)
class CreateAgentCommand:
    caller: Caller
    name: str
    slug: str | None = None
    description: str = ""
    instructions: str = ""
    model: str | None = None
    model_settings: ModelSettings = field(default_factory=ModelSettings)
    tools: Sequence[ToolRef] = ()
    mcp_integration_ids: Sequence[IntegrationId] = ()
    sub_agent_ids: Sequence[AgentId] = ()
    max_steps: int = DEFAULT_MAX_STEPS
    parallel_tool_calls: bool = True
    publish_as_mcp: bool = False


async def _check_links(uow: UnitOfWork, caller: Caller, agent: Agent) -> None:
    if agent.sub_agent_ids:
        found = await uow.agents.existing_ids(caller.org_id, agent.sub_agent_ids)
        missing = [str(a) for a in agent.sub_agent_ids if a not in found]
        if missing:
            raise InvalidReference(f"sub-agents not found: {', '.join(missing)}")
    if agent.mcp_integration_ids:
        known = {i.id for i in await uow.integrations.get_many(caller.org_id, agent.mcp_integration_ids)}
        missing = [str(i) for i in agent.mcp_integration_ids if i not in known]
        if missing:
            raise InvalidReference(f"MCP integrations not found: {', '.join(missing)}")


class CreateAgent:
    def __init__(self, uow: UnitOfWork, clock: Clock, ids: IdGenerator, default_model: str) -> None:
        self._uow, self._clock, self._ids, self._default_model = uow, clock, ids, default_model

    async def execute(self, command: CreateAgentCommand) -> Agent:
        return await create_with_slug(lambda slug: self._create(command, slug), slug=command.slug, name=command.name)

    async def _create(self, command: CreateAgentCommand, slug: str) -> Agent:
        now = self._clock.now()
        agent = Agent(
            id=AgentId(self._ids.new()),
            org_id=command.caller.org_id,
            name=command.name,
            slug=slug,
            description=command.description,
            instructions=command.instructions,
            model=command.model or self._default_model,
            model_settings=command.model_settings,
            tools=tuple(command.tools),
            mcp_integration_ids=tuple(command.mcp_integration_ids),
            sub_agent_ids=tuple(command.sub_agent_ids),
            max_steps=command.max_steps,
            parallel_tool_calls=command.parallel_tool_calls,
            publish_as_mcp=command.publish_as_mcp,
            created_at=now,
            updated_at=now,
        )
        async with self._uow as uow:
            await _check_links(uow, command.caller, agent)
            await uow.agents.add(agent)
            await record_admin_action(
                uow, command.caller, AuditAction.AGENT_CREATED, agent.id, created(agent_fields(agent)), at=now
            )
            await uow.commit()
        return agent


class GetAgent:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, agent_id: AgentId) -> Agent:
        async with self._uow.read_only() as uow:
            agent = await uow.agents.get(caller.org_id, agent_id)
        if agent is None:
            raise AgentNotFound(f"agent {agent_id} not found")
        return agent


class ListAgents:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, page: PageRequest) -> Page[Agent]:
        after = decode_id_cursor(page.cursor)
        async with self._uow.read_only() as uow:
            rows = await uow.agents.list(caller.org_id, limit=page.limit + 1, after=AgentId(after) if after else None)
        return page_of(rows, page.limit, key=lambda a: str(a.id))


@dataclass(frozen=True, kw_only=True)
class UpdateAgentCommand:
    caller: Caller
    agent_id: AgentId
    changes: AgentChanges


class UpdateAgent:
    def __init__(self, uow: UnitOfWork, clock: Clock) -> None:
        self._uow, self._clock = uow, clock

    async def execute(self, command: UpdateAgentCommand) -> Agent:
        async with self._uow as uow:
            agent = await uow.agents.get(command.caller.org_id, command.agent_id)
            if agent is None:
                raise AgentNotFound(f"agent {command.agent_id} not found")
            before, now = agent_fields(agent), self._clock.now()
            agent.apply(command.changes, now)
            await _check_links(uow, command.caller, agent)
            await uow.agents.save(agent)
            changes = changes_between(before, agent_fields(agent))
            await record_admin_action(uow, command.caller, AuditAction.AGENT_UPDATED, agent.id, changes, at=now)
            await uow.commit()
        return agent


class DeleteAgent:
    """Deletes an agent; threads keep their messages, and other agents stop delegating to it."""

    def __init__(self, uow: UnitOfWork, clock: Clock) -> None:
        self._uow, self._clock = uow, clock

    async def execute(self, caller: Caller, agent_id: AgentId) -> None:
        async with self._uow as uow:
            agent = await uow.agents.get(caller.org_id, agent_id)
            if agent is None:
                raise AgentNotFound(f"agent {agent_id} not found")
            now = self._clock.now()
            for other in await uow.agents.referencing_sub_agent(caller.org_id, agent_id):
                if other.forget_sub_agent(agent_id, now):
                    await uow.agents.save(other)
            await uow.agents.delete(caller.org_id, agent_id)
            changes = deleted(agent_fields(agent))
            await record_admin_action(uow, caller, AuditAction.AGENT_DELETED, agent_id, changes, at=now)
            await uow.commit()


@dataclass(frozen=True, kw_only=True)
class ImportAgentCommand:
    caller: Caller
    text: str
    file_name: str
    model: str | None = None
    """Overrides the file's model (else the file's, else the default model)."""
    dry_run: bool = False


@dataclass(frozen=True, kw_only=True)
class ImportedAgent:
    file: AgentFile
    agent: Agent | None
    """None on a dry run."""


class ImportAgent:
    """An agent created from a definition file (ChatMD); with dry_run, only what it would be."""

    def __init__(self, files: AgentFiles, create: CreateAgent) -> None:
        self._files, self._create = files, create

    async def execute(self, command: ImportAgentCommand) -> ImportedAgent:
        read = self._files.read(command.text, command.file_name)
        if command.dry_run:
            return ImportedAgent(file=read, agent=None)
        agent = await self._create.execute(
            CreateAgentCommand(
                caller=command.caller,
                name=read.name,
                slug=read.slug,
                description=read.description,
                instructions=read.instructions,
                model=command.model or read.model,
                tools=read.tools,
            )
        )
        return ImportedAgent(file=read, agent=agent)
