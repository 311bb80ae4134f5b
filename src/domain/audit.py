"""The audit log: what an organization's admins changed, who changed it, and when. Events are never changed."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.ids import ApiKeyId, OrgId

REDACTED = "[redacted]"
"""What an event says of a secret's value: only that there is one."""
VALUE_MAX = 1_000
"""Longer text values are shortened in events (an agent's instructions can be 100,000 characters)."""


class AuditAction(StrEnum):
    """What happened, as `<object type>.<verb>`."""

    API_KEY_CREATED = "api_key.created"
    API_KEY_REVOKED = "api_key.revoked"
    INTEGRATION_CREATED = "integration.created"
    INTEGRATION_UPDATED = "integration.updated"
    INTEGRATION_ENABLED = "integration.enabled"
    INTEGRATION_DISABLED = "integration.disabled"
    INTEGRATION_CREDENTIALS_CHANGED = "integration.credentials_changed"
    INTEGRATION_DELETED = "integration.deleted"
    INTEGRATION_TESTED = "integration.tested"
    AGENT_CREATED = "agent.created"
    AGENT_UPDATED = "agent.updated"
    AGENT_DELETED = "agent.deleted"
    PROMPT_TEMPLATE_CREATED = "prompt_template.created"
    PROMPT_TEMPLATE_UPDATED = "prompt_template.updated"
    PROMPT_TEMPLATE_DELETED = "prompt_template.deleted"
    ORGANIZATION_CREATED = "organization.created"
    LIMITS_CHANGED = "organization.limits_changed"
    SEARCH_LANGUAGE_CHANGED = "organization.search_language_changed"

    @property
    def object_type(self) -> str:
        return self.value.partition(".")[0]


OBJECT_TYPES = tuple(dict.fromkeys(a.object_type for a in AuditAction))


@dataclass(frozen=True, kw_only=True)
class FieldChange:
    """One field of the object: its value before and after (None where there was none; REDACTED for secrets)."""

    field: str
    old: Any = None
    new: Any = None


def _shortened(value: Any) -> Any:
    if isinstance(value, str) and len(value) > VALUE_MAX:
        return value[:VALUE_MAX] + f"…[{len(value) - VALUE_MAX} more characters]"
    return value


def changes_between(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    """The fields whose values differ, in the order `after` (then `before`) names them."""
    names = list(dict.fromkeys([*after, *before]))
    return tuple(
        FieldChange(field=name, old=_shortened(before.get(name)), new=_shortened(after.get(name)))
        for name in names
        if before.get(name) != after.get(name)
    )


def created(after: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    return changes_between({}, after)


def deleted(before: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    return changes_between(before, {})


@dataclass(frozen=True, kw_only=True)
class AuditEvent:
    org_id: OrgId
    action: AuditAction
    object_id: str
    actor_key_id: ApiKeyId | None
    """The API key that acted; None for the operator (the command line)."""
    at: datetime
    changes: tuple[FieldChange, ...] = ()
    id: int | None = None
    """Given when stored; events are numbered in the order they were written."""

    @property
    def object_type(self) -> str:
        return self.action.object_type
