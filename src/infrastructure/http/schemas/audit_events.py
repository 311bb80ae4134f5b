from datetime import datetime
from typing import Any
from uuid import UUID

from domain.audit import AuditAction
from infrastructure.http.schemas.common import ResponseModel


class FieldChangeOut(ResponseModel):
    """One field of the object, before and after; secrets show as "[redacted]", never their value."""

    field: str
    """The field's name, as the object's API shows it"""
    old: Any
    """null when the field had no value (or the object did not exist)"""
    new: Any
    """null when the field has no value (or the object was deleted)"""


class AuditEventOut(ResponseModel):
    """An admin's change, as it was recorded (events are never changed)."""

    id: int
    """Events are numbered in the order they were written"""
    action: AuditAction
    """What happened: `<object type>.<verb>`"""
    object_type: str
    """`api_key`, `integration`, `agent`, `prompt_template` or `organization`"""
    object_id: str
    """The object's id (a prompt template's name)"""
    actor_key_id: UUID | None
    """The API key that made the change; null for the operator's command line"""
    at: datetime
    """When the change was made"""
    changes: list[FieldChangeOut]
    """The fields that changed (all of them, for a created or deleted object)"""
