from collections.abc import Sequence
from typing import Any
from uuid import UUID

from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from domain.agents import Agent, ModelSettings
from domain.ids import AgentId, IntegrationId, OrgId
from domain.native_tools import ToolRef
from domain.tools import ToolType
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.errors import refused
from infrastructure.persistence.prepared import Prepared
from infrastructure.persistence.repositories._rows import utc_required
from infrastructure.persistence.tables import agents


def to_agent(row: Any) -> Agent:
    """An agent of its row (any object with the agents table's columns as attributes)."""
    return Agent(
        id=AgentId(row.id),
        org_id=OrgId(row.org_id),
        name=row.name,
        slug=row.slug,
        description=row.description,
        instructions=row.instructions,
        model=row.model,
        model_settings=ModelSettings.from_dict(row.model_settings),
        tools=tuple(ToolRef(type=ToolType(t["type"]), config=t.get("config", {})) for t in row.tools),
        mcp_integration_ids=tuple(IntegrationId(UUID(i)) for i in row.mcp_integration_ids),
        sub_agent_ids=tuple(AgentId(UUID(i)) for i in row.sub_agent_ids),
        max_steps=row.max_steps,
        parallel_tool_calls=row.parallel_tool_calls,
        publish_as_mcp=row.publish_as_mcp,
        created_at=utc_required(row.created_at),
        updated_at=utc_required(row.updated_at),
    )


def _values(agent: Agent) -> dict[str, Any]:
    return {
        "name": agent.name,
        "slug": agent.slug,
        "description": agent.description,
        "instructions": agent.instructions,
        "model": agent.model,
        "model_settings": agent.model_settings.as_dict(),
        "tools": [{"type": t.type.value, "config": dict(t.config)} for t in agent.tools],
        "mcp_integration_ids": [str(i) for i in agent.mcp_integration_ids],
        "sub_agent_ids": [str(i) for i in agent.sub_agent_ids],
        "max_steps": agent.max_steps,
        "parallel_tool_calls": agent.parallel_tool_calls,
        "publish_as_mcp": agent.publish_as_mcp,
        "updated_at": agent.updated_at,
    }


_GET = Prepared(select(agents).where(agents.c.org_id == bindparam("p_org"), agents.c.id == bindparam("p_id")))


_JOINED = "agent__"  # a label prefix no column of threads or runs starts with ("agent_id" is one of them)
JOINED_AGENT = tuple(column.label(_JOINED + column.name) for column in agents.c)
"""The agents table's columns, to select beside a row joined to its agent (outer join); read with `joined_agent`."""


class _Prefixed:
    """A row's columns whose labels start with a prefix, by their names without it."""

    __slots__ = ("_prefix", "_row")

    def __init__(self, row: Any, prefix: str) -> None:
        self._row, self._prefix = row, prefix

    def __getattr__(self, name: str) -> Any:
        return getattr(self._row, self._prefix + name)


def joined_agent(row: Any) -> Agent | None:
    """The agent selected with JOINED_AGENT beside the row; None when the outer join found none."""
    columns = _Prefixed(row, _JOINED)
    return to_agent(columns) if columns.id is not None else None


async def agent_of(connection: UnitConnection, org_id: OrgId, agent_id: AgentId) -> Agent | None:
    row = (await connection.run(_GET, {"p_org": org_id, "p_id": agent_id})).first()
    return to_agent(row) if row else None


class SqlAgentRepository:
    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def add(self, agent: Agent) -> None:
        values = _values(agent) | {"id": agent.id, "org_id": agent.org_id, "created_at": agent.created_at}
        await self._write(insert(agents).values(**values), agent.slug)

    async def get(self, org_id: OrgId, agent_id: AgentId) -> Agent | None:
        return await agent_of(self._conn, org_id, agent_id)

    async def get_by_slug(self, org_id: OrgId, slug: str) -> Agent | None:
        row = (await self._conn.execute(select(agents).where(agents.c.org_id == org_id, agents.c.slug == slug))).first()
        return to_agent(row) if row else None

    async def published(self, org_id: OrgId) -> Sequence[Agent]:
        query = (
            select(agents).where(agents.c.org_id == org_id, agents.c.publish_as_mcp.is_(True)).order_by(agents.c.slug)
        )
        return [to_agent(row) for row in await self._conn.execute(query)]

    async def list(self, org_id: OrgId, *, limit: int, after: AgentId | None) -> Sequence[Agent]:
        query = select(agents).where(agents.c.org_id == org_id).order_by(agents.c.id).limit(limit)
        if after is not None:
            query = query.where(agents.c.id > after)
        return [to_agent(row) for row in await self._conn.execute(query)]

    async def existing_ids(self, org_id: OrgId, ids: Sequence[AgentId]) -> set[AgentId]:
        query = select(agents.c.id).where(agents.c.org_id == org_id, agents.c.id.in_(list(ids)))
        return {AgentId(row.id) for row in await self._conn.execute(query)}

    async def referencing_sub_agent(self, org_id: OrgId, agent_id: AgentId) -> Sequence[Agent]:
        # Sub-agent links are a short JSON list per agent; an organization has few agents.
        rows = await self._conn.execute(select(agents).where(agents.c.org_id == org_id, agents.c.id != agent_id))
        return [a for a in map(to_agent, rows) if agent_id in a.sub_agent_ids]

    async def using_integration(self, org_id: OrgId, integration_id: IntegrationId) -> Sequence[Agent]:
        rows = await self._conn.execute(select(agents).where(agents.c.org_id == org_id))
        return [a for a in map(to_agent, rows) if integration_id in a.mcp_integration_ids]

    async def save(self, agent: Agent) -> None:
        query = update(agents).where(agents.c.org_id == agent.org_id, agents.c.id == agent.id).values(**_values(agent))
        await self._write(query, agent.slug)

    async def delete(self, org_id: OrgId, agent_id: AgentId) -> None:
        await self._conn.execute(delete(agents).where(agents.c.org_id == org_id, agents.c.id == agent_id))

    async def _write(self, statement: Any, slug: str) -> None:
        try:
            await self._conn.execute(statement)
        except IntegrityError as error:
            raise refused(error, slug) from None
