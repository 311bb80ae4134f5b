from datetime import date
from typing import Annotated

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Query

from application.errors import PermissionDenied
from application.ports.persistence import UsageGrouping
from application.use_cases.usage import DEFAULT_DAYS, GetUsage, UsageQuery
from domain.errors import InvalidValue
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openapi import ApiRoute, errors
from infrastructure.http.schemas.usage import UsageOut

router = APIRouter(prefix="/v1/usage", tags=["usage"], route_class=ApiRoute)


@router.get(
    "",
    response_model=UsageOut,
    summary="Tokens and tool calls of the organization's model calls, by day, agent or model (admin)",
    responses=errors(PermissionDenied, InvalidValue),
)
@inject
async def get_usage(
    caller: CallerDep,
    use_case: Annotated[GetUsage, Depends(Provide[Container.get_usage])],
    from_: Annotated[
        date | None, Query(alias="from", description=f"First day (UTC); default {DEFAULT_DAYS - 1} days before `to`")
    ] = None,
    to: Annotated[date | None, Query(description="Last day (UTC), included; default today")] = None,
    group_by: Annotated[UsageGrouping, Query(description="One line per day, agent or model")] = UsageGrouping.DAY,
) -> UsageOut:
    report = await use_case.execute(UsageQuery(caller=caller, first_day=from_, last_day=to, group_by=group_by))
    return UsageOut.of(report)
