from typing import Annotated

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Query

from application.errors import InvalidCursor, PermissionDenied
from application.pagination import PageRequest
from application.use_cases.audit_events import AuditEventFilter, ListAuditEvents
from domain.audit import OBJECT_TYPES, AuditAction
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openapi import ApiRoute, errors
from infrastructure.http.schemas.audit_events import AuditEventOut
from infrastructure.http.schemas.common import PageOut, page_request

router = APIRouter(prefix="/v1/audit-events", tags=["audit log"], route_class=ApiRoute)


@router.get(
    "",
    response_model=PageOut[AuditEventOut],
    summary="The organization's audit log: every change admins made, oldest first (admin)",
    responses=errors(PermissionDenied, InvalidCursor),
)
@inject
async def list_audit_events(
    caller: CallerDep,
    page: Annotated[PageRequest, Depends(page_request)],
    use_case: Annotated[ListAuditEvents, Depends(Provide[Container.list_audit_events])],
    type: Annotated[AuditAction | None, Query(description="Only events of this type")] = None,
    object_type: Annotated[
        str | None,
        Query(pattern="^(" + "|".join(OBJECT_TYPES) + ")$", description="Only events about this kind of object"),
    ] = None,
    object_id: Annotated[str | None, Query(max_length=200, description="Only events about this object")] = None,
) -> PageOut[AuditEventOut]:
    where = AuditEventFilter(action=type, object_type=object_type, object_id=object_id)
    return PageOut[AuditEventOut].model_validate(await use_case.execute(caller, page, where))
