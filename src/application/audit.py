"""Audit events for admin actions, written by the use case in the transaction of the change they describe.

Any use case that changes an organization's settings records what it did with `record_admin_action(uow, ...)`
before it commits: the event and the change are stored together or not at all. The snapshots below are what an
event may show of each object: secrets never appear (credentials only as REDACTED, key hashes not at all).
"""

from collections.abc import Mapping, Sequence
from dataclasses import asdict, is_dataclass
from datetime import datetime
from enum import Enum
from typing import Any
from uuid import UUID

from application.caller import Caller
from application.ports.persistence import UnitOfWork
from domain.agents import Agent
from domain.api_keys import ApiKey
from domain.audit import REDACTED, AuditAction, AuditEvent, FieldChange
from domain.integrations import McpIntegration
from domain.prompt_templates import PromptTemplate


def plain(value: Any) -> Any:
    """A value as JSON can hold it."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return plain(asdict(value))
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    return value


def _fields(values: dict[str, Any]) -> dict[str, Any]:
    return {name: plain(value) for name, value in values.items()}


def api_key_fields(key: ApiKey) -> dict[str, Any]:
    return {"name": key.name, "role": key.role.value, "revoked_at": plain(key.revoked_at)}


def agent_fields(agent: Agent) -> dict[str, Any]:
    return _fields(
        {
            "name": agent.name,
            "slug": agent.slug,
            "description": agent.description,
            "instructions": agent.instructions,
            "model": agent.model,
            "model_settings": agent.model_settings.as_dict(),
            "tools": [{"type": t.type, "config": dict(t.config)} for t in agent.tools],
            "mcp_integration_ids": agent.mcp_integration_ids,
            "sub_agent_ids": agent.sub_agent_ids,
            "max_steps": agent.max_steps,
            "parallel_tool_calls": agent.parallel_tool_calls,
            "publish_as_mcp": agent.publish_as_mcp,
        }
    )


def integration_fields(integration: McpIntegration) -> dict[str, Any]:
    return _fields(
        {
            "name": integration.name,
            "slug": integration.slug,
            "transport": integration.transport,
            "url": integration.url,
            "server": integration.server,
            "auth_type": integration.auth_type,
            "auth_header_name": integration.auth_header_name,
            "credentials": None if integration.credentials is None else REDACTED,  # never the value
            "tool_filter": {"mode": integration.tool_filter.mode, "names": integration.tool_filter.names},
            "timeout_seconds": integration.timeout_seconds,
            "enabled": integration.enabled,
        }
    )


def template_fields(template: PromptTemplate) -> dict[str, Any]:
    return _fields(
        {
            "name": template.name,
            "description": template.description,
            "arguments": template.arguments,
            "messages": template.messages,
            "agent_id": template.agent_id,
        }
    )


async def record_admin_action(
    uow: UnitOfWork,
    caller: Caller,
    action: AuditAction,
    object_id: object,
    changes: Sequence[FieldChange] = (),
    *,
    at: datetime,
) -> AuditEvent:
    """Store the event in the open unit of work; it is committed with the change it describes."""
    event = AuditEvent(
        org_id=caller.org_id,
        action=action,
        object_id=str(object_id),
        actor_key_id=caller.api_key_id,
        at=at,
        changes=tuple(changes),
    )
    await uow.audit_events.add(event)
    return event
