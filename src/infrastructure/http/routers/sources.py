from typing import Annotated
from uuid import UUID

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Form, Query, Response, UploadFile
from pydantic import BaseModel, ConfigDict, Field

from application.errors import (
    AgentNotFound,
    DuplicateSource,
    InvalidReference,
    SourceNotFound,
    SourceTooLarge,
    ThreadNotFound,
    UnreadableSource,
    UnsupportedSourceType,
    UrlNotAllowed,
)
from application.pagination import PageRequest
from application.use_cases.sources import (
    SEARCH_LIMIT_MAX,
    DeleteSource,
    GetSource,
    IndexedSource,
    ListPassages,
    ListSources,
    ReindexSource,
    SearchSources,
    SearchSourcesQuery,
    ShowSource,
    UploadSource,
    UploadSourceCommand,
)
from domain.errors import InvalidValue
from domain.ids import AgentId, SourceId, ThreadId
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openapi import ApiRoute, errors
from infrastructure.http.schemas.common import PageOut, page_request
from infrastructure.http.schemas.sources import (
    IndexingOut,
    PassageOut,
    SearchResultsOut,
    SourceOut,
    SourceSummaryOut,
    UploadedSourceOut,
)

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
    summary="A source with its text or table content, and how far it is indexed",
    responses=errors(SourceNotFound),
)
@inject
async def get_source(
    source_id: UUID,
    caller: CallerDep,
    use_case: Annotated[ShowSource, Depends(Provide[Container.show_source])],
) -> SourceOut:
    shown = await use_case.execute(caller, SourceId(source_id))
    return SourceOut.model_validate(shown.source).model_copy(
        update={"indexing": IndexingOut.model_validate(shown.indexing)}
    )


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


_UPLOAD_ERRORS = errors(
    SourceTooLarge, UnsupportedSourceType, UnreadableSource, UrlNotAllowed, DuplicateSource, InvalidReference
)
_UPLOAD_DESCRIPTION = (
    "Multipart form: the file in `file`, or a `url` to fetch it from (through the outbound network policy); "
    "`name` overrides the file's name. Plain text, Markdown, CSV (kept as a table), HTML (its readable text) "
    "and PDF (its text page by page) are read; the type comes from the part's content type, else the name's "
    "extension. The source is split into passages (by heading and paragraph, page, or table rows) and indexed "
    "for search at once. Larger than the source limit: 413; another kind of file: 415; a file that is not what "
    "it claims or holds no text: 422; the same content already uploaded here: 409 with the existing source's id."
)


class SourceUpload(BaseModel):
    """A file to keep as a source: the file itself, or a URL to fetch it from."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    file: UploadFile | None = None
    """The file (its part's content type, else its name's extension, tells its kind)"""
    url: str | None = Field(default=None, max_length=2048)
    """An http(s) URL to fetch the file from, instead of `file`"""
    name: str | None = Field(default=None, max_length=500)
    """The source's name (default: the file's name)"""


UploadForm = Annotated[SourceUpload, Form(media_type="multipart/form-data")]


async def _upload_command(form: SourceUpload, max_bytes: int, **owner: ThreadId | AgentId) -> UploadSourceCommand:
    if (form.file is None) == (form.url is None):
        raise InvalidValue("send a file in the `file` field or a `url`, one of the two")
    if form.file is None:
        return UploadSourceCommand(url=form.url, name=form.name, **owner)  # type: ignore[arg-type]
    # One byte over the limit is enough to refuse it; the rest is never read into memory.
    content = await form.file.read(max_bytes + 1)
    return UploadSourceCommand(
        content=content,
        name=form.name or form.file.filename,
        mime_type=form.file.content_type,
        **owner,  # type: ignore[arg-type]
    )


def _uploaded(indexed: IndexedSource) -> UploadedSourceOut:
    return UploadedSourceOut.model_validate(
        {"source": indexed.source, "passages": indexed.passages, "indexing": indexed.indexing}
    )


@router.post(
    "/threads/{thread_id}/sources",
    status_code=201,
    response_model=UploadedSourceOut,
    summary="Upload a file (or fetch a URL) as a source of the thread",
    description=_UPLOAD_DESCRIPTION,
    responses={**errors(ThreadNotFound), **_UPLOAD_ERRORS},
)
@inject
async def upload_thread_source(
    thread_id: UUID,
    caller: CallerDep,
    form: UploadForm,
    use_case: Annotated[UploadSource, Depends(Provide[Container.upload_source])],
) -> UploadedSourceOut:
    command = await _upload_command(form, use_case.max_bytes, thread_id=ThreadId(thread_id))
    return _uploaded(await use_case.execute(caller, command))


@router.post(
    "/agents/{agent_id}/sources",
    status_code=201,
    response_model=UploadedSourceOut,
    summary="Upload a file (or fetch a URL) as a source of the agent, read by all its threads",
    description=_UPLOAD_DESCRIPTION,
    responses={**errors(AgentNotFound), **_UPLOAD_ERRORS},
)
@inject
async def upload_agent_source(
    agent_id: UUID,
    caller: CallerDep,
    form: UploadForm,
    use_case: Annotated[UploadSource, Depends(Provide[Container.upload_source])],
) -> UploadedSourceOut:
    command = await _upload_command(form, use_case.max_bytes, agent_id=AgentId(agent_id))
    return _uploaded(await use_case.execute(caller, command))


@router.delete(
    "/sources/{source_id}",
    status_code=204,
    response_class=Response,
    summary="Delete a source and its passages",
    responses=errors(SourceNotFound),
)
@inject
async def delete_source(
    source_id: UUID,
    caller: CallerDep,
    use_case: Annotated[DeleteSource, Depends(Provide[Container.delete_source])],
) -> Response:
    await use_case.execute(caller, SourceId(source_id))
    return Response(status_code=204)


@router.post(
    "/sources/{source_id}/reindex",
    response_model=UploadedSourceOut,
    summary="Split a source into passages again and index them",
    responses=errors(SourceNotFound),
)
@inject
async def reindex_source(
    source_id: UUID,
    caller: CallerDep,
    use_case: Annotated[ReindexSource, Depends(Provide[Container.reindex_source])],
) -> UploadedSourceOut:
    return _uploaded(await use_case.execute(caller, SourceId(source_id)))


@router.get(
    "/sources/{source_id}/passages",
    response_model=PageOut[PassageOut],
    summary="A source's passages in order, with their locations",
    responses=errors(SourceNotFound),
)
@inject
async def list_passages(
    source_id: UUID,
    caller: CallerDep,
    page: Annotated[PageRequest, Depends(page_request)],
    use_case: Annotated[ListPassages, Depends(Provide[Container.list_passages])],
) -> PageOut[PassageOut]:
    return PageOut[PassageOut].model_validate(await use_case.execute(caller, SourceId(source_id), page))


@router.get(
    "/threads/{thread_id}/sources/search",
    response_model=SearchResultsOut,
    summary="Search the passages of the thread's sources and its agent's",
    description="Any text is a query: its words are looked up (stemmed, in the organization's search language "
    'on PostgreSQL); passages holding more and rarer words rank first. On PostgreSQL, `"a phrase"`, `or` and '
    "`-word` work as in web search engines. With an embeddings model configured (THREADLINE_EMBEDDINGS_MODEL) "
    "the search is hybrid: passages close in meaning are merged in by reciprocal rank fusion.",
    responses=errors(ThreadNotFound, InvalidValue),
)
@inject
async def search_thread_sources(
    thread_id: UUID,
    caller: CallerDep,
    use_case: Annotated[SearchSources, Depends(Provide[Container.search_sources])],
    q: Annotated[str, Query(min_length=1, max_length=1000, description="What to look for")],
    limit: Annotated[int, Query(ge=1, le=SEARCH_LIMIT_MAX, description="How many passages at most")] = 10,
    source_id: Annotated[UUID | None, Query(description="Only search this source")] = None,
) -> SearchResultsOut:
    query = SearchSourcesQuery(
        thread_id=ThreadId(thread_id),
        text=q,
        limit=limit,
        source_id=SourceId(source_id) if source_id else None,
    )
    found = await use_case.execute(caller, query)
    return SearchResultsOut.model_validate({"data": found.hits, "mode": found.mode, "note": found.note})
