"""The organization's agents as the models an OpenAI-compatible client can pick (`model` = the agent's slug)."""

from collections.abc import Sequence
from dataclasses import dataclass

from application.caller import Caller
from application.errors import AgentNotFound, OrganizationNotFound
from application.ports.persistence import UnitOfWork
from domain.agents import Agent
from domain.ids import AgentId

PAGE = 500


@dataclass(frozen=True, kw_only=True)
class AgentModels:
    owner: str
    """The organization's slug: who owns the models."""
    agents: Sequence[Agent]


class ListAgentModels:
    """Every agent of the caller's organization, or only the one with `slug` (AgentNotFound if none has it)."""

    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, slug: str | None = None) -> AgentModels:
        async with self._uow.read_only() as uow:
            org = await uow.organizations.get(caller.org_id)
            if org is None:
                raise OrganizationNotFound("the organization no longer exists")
            if slug is not None:
                agent = await uow.agents.get_by_slug(caller.org_id, slug)
                if agent is None:
                    raise AgentNotFound(f"the model {slug!r} does not exist: no agent has that slug")
                return AgentModels(owner=org.slug, agents=[agent])
            agents: list[Agent] = []
            after: AgentId | None = None
            while True:
                page = await uow.agents.list(caller.org_id, limit=PAGE, after=after)
                agents.extend(page)
                if len(page) < PAGE:
                    return AgentModels(owner=org.slug, agents=agents)
                after = page[-1].id
