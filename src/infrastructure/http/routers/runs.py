import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Annotated
from uuid import UUID

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import StreamingResponse

from application.caller import Caller
from application.errors import Conflict, IdempotencyKeyReused, InvalidReference, RunNotFound, ThreadBusy, ThreadNotFound
from application.pagination import POSITION_MAX, PageRequest
from application.ports.tracing import Tracer
from application.runs.answer_questions import AnswerQuestions
from application.runs.cancel_run import CancelRun
from application.runs.create_run import CreateRun
from application.runs.follow_run import FollowRun, RunFollower
from application.runs.queries import GetRun, ListRuns, RunFilter
from application.runs.submit_tool_results import SubmitToolResults
from domain.errors import IllegalTransition, InvalidValue
from domain.ids import AgentId, RunId, ThreadId
from domain.runs import Run, RunNotWaiting, RunStatus
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openapi import ApiRoute, errors
from infrastructure.http.schemas.common import PageOut, page_request
from infrastructure.http.schemas.runs import AnswersIn, RunCreate, RunOut, ToolResultsIn, sse_frame

router = APIRouter(prefix="/v1", tags=["runs"], route_class=ApiRoute)
HEARTBEAT_SECONDS = 15.0
SSE = {
    "description": "With `stream: true`: a text/event-stream of run events",
    "content": {"text/event-stream": {}},
}


def _stopping(request: Request) -> asyncio.Event:
    """Set when the server is asked to stop: open event streams end, and their clients come back elsewhere."""
    stopping: asyncio.Event = request.app.state.stopping
    return stopping


StoppingDep = Annotated[asyncio.Event, Depends(_stopping)]
TracerDep = Annotated[Tracer, Depends(Provide[Container.tracer])]
"""Gives each run its `trace_url` (the tracer knows where its backend shows a trace)."""


async def _stream(following: AbstractAsyncContextManager[RunFollower], stopping: asyncio.Event) -> AsyncIterator[str]:
    async with following as follower:
        async for batch in follower.batches(HEARTBEAT_SECONDS, until=stopping):
            # the events that arrived together go out in one write
            yield ": keep-alive\n\n" if batch is None else "".join(map(sse_frame, batch))


async def _event_stream(
    follow: FollowRun,
    caller: Caller,
    run_id: RunId,
    stopping: asyncio.Event,
    after_seq: int = 0,
    status_code: int = 200,
    created: Run | None = None,
) -> StreamingResponse:
    # Subscribed before the response starts, so no event published from here on is missed.
    following = await follow.execute(caller, run_id, after_seq, created=created)
    return StreamingResponse(
        _stream(following, stopping),
        status_code=status_code,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.post(
    "/threads/{thread_id}/runs",
    status_code=201,
    response_model=RunOut,
    responses={
        200: {"description": "The run this idempotency key already started"},
        201: SSE,
        **errors(ThreadNotFound, InvalidReference, InvalidValue, ThreadBusy, IdempotencyKeyReused, Conflict),
    },
    summary="Run an agent on the thread",
)
@inject
async def create_run(
    thread_id: UUID,
    body: RunCreate,
    caller: CallerDep,
    tracer: TracerDep,
    response: Response,
    use_case: Annotated[CreateRun, Depends(Provide[Container.create_run])],
    follow: Annotated[FollowRun, Depends(Provide[Container.follow_run])],
    stopping: StoppingDep,
) -> RunOut | StreamingResponse:
    created = await use_case.execute(body.to_command(caller, thread_id))
    if body.stream:
        status_code = 201 if created.created else 200
        run = created.run if created.created else None
        return await _event_stream(follow, caller, created.run.id, stopping, status_code=status_code, created=run)
    if not created.created:
        response.status_code = 200
    return RunOut.model_validate(created.run, context=tracer)


@router.get(
    "/threads/{thread_id}/runs",
    response_model=PageOut[RunOut],
    summary="The thread's runs",
    responses=errors(ThreadNotFound),
)
@inject
async def list_thread_runs(
    thread_id: UUID,
    caller: CallerDep,
    tracer: TracerDep,
    page: Annotated[PageRequest, Depends(page_request)],
    use_case: Annotated[ListRuns, Depends(Provide[Container.list_runs])],
) -> PageOut[RunOut]:
    result = await use_case.execute(caller, page, RunFilter(thread_id=ThreadId(thread_id)))
    return PageOut[RunOut].model_validate(result, context=tracer)


@router.get(
    "/runs",
    response_model=PageOut[RunOut],
    summary="The organization's runs",
    responses=errors(ThreadNotFound, InvalidValue),
)
@inject
async def list_runs(
    caller: CallerDep,
    tracer: TracerDep,
    page: Annotated[PageRequest, Depends(page_request)],
    use_case: Annotated[ListRuns, Depends(Provide[Container.list_runs])],
    agent_id: UUID | None = None,
    thread_id: UUID | None = None,
    status: RunStatus | None = None,
    created_after: Annotated[
        datetime | None,
        Query(description="Runs created at or after this time (ISO 8601, e.g. 2026-11-23T09:00:00Z; no offset: UTC)"),
    ] = None,
    created_before: Annotated[
        datetime | None,
        Query(description="Runs created before this time (ISO 8601; no offset: UTC); later than created_after"),
    ] = None,
) -> PageOut[RunOut]:
    filters = RunFilter(
        agent_id=AgentId(agent_id) if agent_id else None,
        thread_id=ThreadId(thread_id) if thread_id else None,
        status=status,
        created_after=created_after,
        created_before=created_before,
    )
    result = await use_case.execute(caller, page, filters)
    return PageOut[RunOut].model_validate(result, context=tracer)


@router.get("/runs/{run_id}", response_model=RunOut, responses=errors(RunNotFound))
@inject
async def get_run(
    run_id: UUID,
    caller: CallerDep,
    tracer: TracerDep,
    use_case: Annotated[GetRun, Depends(Provide[Container.get_run])],
) -> RunOut:
    return RunOut.model_validate(await use_case.execute(caller, RunId(run_id)), context=tracer)


@router.get(
    "/runs/{run_id}/events",
    response_class=StreamingResponse,
    responses={200: SSE, **errors(RunNotFound)},
    summary="Server-Sent Events: what happened so far, then live, until the run ends or waits",
)
@inject
async def run_events(
    run_id: UUID,
    caller: CallerDep,
    follow: Annotated[FollowRun, Depends(Provide[Container.follow_run])],
    stopping: StoppingDep,
    after: Annotated[int, Query(ge=0, le=POSITION_MAX, description="Only events after this sequence number")] = 0,
    last_event_id: Annotated[
        int | None, Header(ge=0, le=POSITION_MAX, description="The last event seen: resume after it")
    ] = None,
) -> StreamingResponse:
    return await _event_stream(follow, caller, RunId(run_id), stopping, max(after, last_event_id or 0))


@router.post(
    "/runs/{run_id}/cancel",
    response_model=RunOut,
    summary="Cancel a run",
    responses=errors(RunNotFound, IllegalTransition, Conflict),
)
@inject
async def cancel_run(
    run_id: UUID,
    caller: CallerDep,
    tracer: TracerDep,
    use_case: Annotated[CancelRun, Depends(Provide[Container.cancel_run])],
) -> RunOut:
    return RunOut.model_validate(await use_case.execute(caller, RunId(run_id)), context=tracer)


_GOES_ON = {200: SSE, **errors(RunNotFound, RunNotWaiting, InvalidValue, Conflict)}
"""What the routes that let a waiting run go on answer."""


async def _going_on(
    run: Run, stream: bool, follow: FollowRun, caller: Caller, stopping: asyncio.Event, tracer: Tracer
) -> RunOut | StreamingResponse:
    """The run that goes on, or (`stream`) a stream of its further events."""
    if stream:
        return await _event_stream(follow, caller, run.id, stopping)
    return RunOut.model_validate(run, context=tracer)


@router.post(
    "/runs/{run_id}/tool-results",
    response_model=RunOut,
    responses=_GOES_ON,
    summary="Results of the client tool calls the run waits for; the run goes on",
)
@inject
async def submit_tool_results(
    run_id: UUID,
    body: ToolResultsIn,
    caller: CallerDep,
    tracer: TracerDep,
    use_case: Annotated[SubmitToolResults, Depends(Provide[Container.submit_tool_results])],
    follow: Annotated[FollowRun, Depends(Provide[Container.follow_run])],
    stopping: StoppingDep,
) -> RunOut | StreamingResponse:
    run = await use_case.execute(body.to_command(caller, run_id))
    return await _going_on(run, body.stream, follow, caller, stopping, tracer)


@router.post(
    "/runs/{run_id}/answers",
    response_model=RunOut,
    responses=_GOES_ON,
    summary="The user's answers to the questions the run waits for (elicitation); its tool calls go on with them",
)
@inject
async def answer_questions(
    run_id: UUID,
    body: AnswersIn,
    caller: CallerDep,
    tracer: TracerDep,
    use_case: Annotated[AnswerQuestions, Depends(Provide[Container.answer_questions])],
    follow: Annotated[FollowRun, Depends(Provide[Container.follow_run])],
    stopping: StoppingDep,
) -> RunOut | StreamingResponse:
    run = await use_case.execute(body.to_command(caller, run_id))
    return await _going_on(run, body.stream, follow, caller, stopping, tracer)
