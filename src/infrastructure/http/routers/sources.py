from typing import Annotated
from uuid import UUID

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Response

from application.errors import AgentNotFound, SourceNotFound, ThreadNotFound
from application.pagination import PageRequest
from application.use_cases.sources import GetSource, ListSources
from domain.ids import AgentId, SourceId, ThreadId
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openapi import ApiRoute, errors
from infrastructure.http.schemas.common import PageOut, page_request
from infrastructure.http.schemas.sources import SourceOut, SourceSummaryOut

router = APIRouter(prefix="/v1", tags=["sources"], route_class=ApiRoute)


@router.get("/threads/{thread_id}/sources", response_model=PageOut[SourceSummaryOut], responses=errors(ThreadNotFound))
@inject
async def list_thread_sources(
    thread_id: UUID,
    caller: CallerDep,
    page: Annotated[PageRequest, Depends(page_request)],
    use_case: Annotated[ListSources, Depends(Provide[Container.list_sources])],
) -> PageOut[SourceSummaryOut]:
    result = await use_case.execute(caller, page, thread_id=ThreadId(thread_id))
    return PageOut[SourceSummaryOut].model_validate(result)


@router.get("/agents/{agent_id}/sources", response_model=PageOut[SourceSummaryOut], responses=errors(AgentNotFound))
@inject
async def list_agent_sources(
    agent_id: UUID,
    caller: CallerDep,
    page: Annotated[PageRequest, Depends(page_request)],
    use_case: Annotated[ListSources, Depends(Provide[Container.list_sources])],
) -> PageOut[SourceSummaryOut]:
    result = await use_case.execute(caller, page, agent_id=AgentId(agent_id))
    return PageOut[SourceSummaryOut].model_validate(result)


@router.get(
    "/sources/{source_id}",
    response_model=SourceOut,
    summary="A source with its text or table content",
    responses=errors(SourceNotFound),
)
@inject
async def get_source(
    source_id: UUID,
    caller: CallerDep,
    use_case: Annotated[GetSource, Depends(Provide[Container.get_source])],
) -> SourceOut:
    return SourceOut.model_validate(await use_case.execute(caller, SourceId(source_id)))


@router.get(
    "/sources/{source_id}/content",
    summary="Download a source's content with its mime type",
    responses=errors(SourceNotFound),
)
@inject
async def get_source_content(
    source_id: UUID,
    caller: CallerDep,
    use_case: Annotated[GetSource, Depends(Provide[Container.get_source])],
) -> Response:
    source = await use_case.execute(caller, SourceId(source_id))
    if source.blob is not None:
        body, media_type = source.blob, source.mime_type or "application/octet-stream"
    else:
        body, media_type = (
            (source.readable_text or "").encode(),
            source.mime_type or "text/plain; charset=utf-8",
        )
    filename = "".join(c if c.isalnum() or c in "._-" else "_" for c in source.name)[:100] or "source"
    return Response(
        content=body,
        media_type=media_type,
        headers={
            "Content-Disposition": f'attachment; filename="{filename}"',
            "X-Content-Type-Options": "nosniff",
        },
    )
