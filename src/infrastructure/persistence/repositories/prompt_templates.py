from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError

from domain.ids import AgentId, OrgId
from domain.prompt_templates import ArgumentType, PromptTemplate, TemplateArgument, TemplateMessage
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.errors import refused
from infrastructure.persistence.repositories._rows import utc_required
from infrastructure.persistence.tables import prompt_argument_values as values_table
from infrastructure.persistence.tables import prompt_templates as table


def _argument_json(argument: TemplateArgument) -> dict[str, Any]:
    default = list(argument.default) if isinstance(argument.default, tuple) else argument.default
    return {
        "name": argument.name,
        "description": argument.description,
        "required": argument.required,
        "type": argument.type.value,
        "default": default,
        "autocomplete": list(argument.autocomplete),
        "remember": argument.remember,
    }


def _argument(data: dict[str, Any]) -> TemplateArgument:
    default = data.get("default")
    return TemplateArgument(
        name=data["name"],
        description=data.get("description", ""),
        required=data.get("required", False),
        type=ArgumentType(data.get("type", "string")),
        default=tuple(default) if isinstance(default, list) else default,
        autocomplete=tuple(data.get("autocomplete", ())),
        remember=data.get("remember", False),
    )


def _to_entity(row: Any) -> PromptTemplate:
    return PromptTemplate(
        org_id=OrgId(row.org_id),
        name=row.name,
        description=row.description,
        arguments=tuple(_argument(a) for a in row.arguments),
        messages=tuple(TemplateMessage(role=m["role"], content=m["content"]) for m in row.messages),
        agent_id=AgentId(row.agent_id) if row.agent_id else None,
        created_at=utc_required(row.created_at),
        updated_at=utc_required(row.updated_at),
    )


def _values(template: PromptTemplate) -> dict[str, Any]:
    return {
        "name": template.name,
        "description": template.description,
        "arguments": [_argument_json(a) for a in template.arguments],
        "messages": [{"role": m.role, "content": m.content} for m in template.messages],
        "agent_id": template.agent_id,
        "updated_at": template.updated_at,
    }


class SqlPromptTemplateRepository:
    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def add(self, template: PromptTemplate) -> None:
        try:
            await self._conn.execute(
                insert(table).values(org_id=template.org_id, created_at=template.created_at, **_values(template))
            )
        except IntegrityError as error:
            raise refused(error, template.name) from None

    async def get(self, org_id: OrgId, name: str) -> PromptTemplate | None:
        row = (await self._conn.execute(select(table).where(table.c.org_id == org_id, table.c.name == name))).first()
        return _to_entity(row) if row else None

    async def list(self, org_id: OrgId) -> Sequence[PromptTemplate]:
        query = select(table).where(table.c.org_id == org_id).order_by(table.c.name)
        return [_to_entity(row) for row in await self._conn.execute(query)]

    async def save(self, template: PromptTemplate, previous_name: str) -> None:
        try:
            await self._conn.execute(
                update(table)
                .where(table.c.org_id == template.org_id, table.c.name == previous_name)
                .values(**_values(template))
            )
        except IntegrityError as error:
            raise refused(error, template.name) from None

    async def delete(self, org_id: OrgId, name: str) -> None:
        await self._conn.execute(delete(table).where(table.c.org_id == org_id, table.c.name == name))


class SqlArgumentValueRepository:
    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def remember(self, org_id: OrgId, template: str, argument: str, values: Sequence[str], at: datetime) -> None:
        rows = [
            {"org_id": org_id, "template": template, "argument": argument, "value": v[:500], "last_used_at": at}
            for v in dict.fromkeys(values)
            if v
        ]
        if not rows:
            return
        dialect = pg_insert if self._conn.dialect.name == "postgresql" else sqlite_insert
        statement = dialect(values_table).values(rows)
        await self._conn.execute(
            statement.on_conflict_do_update(
                index_elements=["org_id", "template", "argument", "value"],
                set_={"last_used_at": statement.excluded.last_used_at},
            )
        )

    async def suggest(self, org_id: OrgId, template: str, argument: str, prefix: str, limit: int) -> Sequence[str]:
        query = (
            select(values_table.c.value)
            .where(
                values_table.c.org_id == org_id,
                values_table.c.template == template,
                values_table.c.argument == argument,
                func.lower(values_table.c.value).startswith(prefix.lower(), autoescape=True),
            )
            .order_by(values_table.c.last_used_at.desc())
            .limit(limit)
        )
        return [row.value for row in await self._conn.execute(query)]
