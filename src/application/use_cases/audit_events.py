"""The organization's audit log, read by its admins."""

from dataclasses import dataclass

from application.caller import Caller
from application.errors import InvalidCursor
from application.pagination import Page, PageRequest, decode_cursor, page_of
from application.ports.persistence import UnitOfWork
from domain.audit import AuditAction, AuditEvent


@dataclass(frozen=True, kw_only=True)
class AuditEventFilter:
    action: AuditAction | None = None
    object_type: str | None = None
    object_id: str | None = None


def _decode(cursor: str | None) -> int | None:
    key = decode_cursor(cursor)
    if key is None:
        return None
    if not (key.isascii() and key.isdigit()) or len(key) > 19:
        raise InvalidCursor("the cursor is not one this API handed out")
    return int(key)


class ListAuditEvents:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, page: PageRequest, where: AuditEventFilter) -> Page[AuditEvent]:
        caller.require_admin("read the audit log")
        after = _decode(page.cursor)
        async with self._uow.read_only() as uow:
            rows = await uow.audit_events.list(
                caller.org_id,
                limit=page.limit + 1,
                after=after,
                action=where.action,
                object_type=where.object_type,
                object_id=where.object_id,
            )
        return page_of(rows, page.limit, key=lambda e: str(e.id))
