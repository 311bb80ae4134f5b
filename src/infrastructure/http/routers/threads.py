from typing import Annotated
from uuid import UUID

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Query, Response

from application.errors import Conflict, InvalidReference, ThreadBusy, ThreadNotFound
from application.pagination import PageRequest
from application.use_cases.threads import (
    AppendUserMessage,
    AppendUserMessageCommand,
    CreateThread,
    DeleteThread,
    GetThread,
    ListMessages,
    ListThreads,
)
from domain.errors import InvalidValue
from domain.ids import AgentId, ThreadId
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openapi import ApiRoute, errors
from infrastructure.http.schemas.common import PageOut, page_request
from infrastructure.http.schemas.threads import MessageCreate, MessageOut, ThreadCreate, ThreadOut

router = APIRouter(prefix="/v1/threads", tags=["threads"], route_class=ApiRoute)


@router.post("", status_code=201, response_model=ThreadOut, responses=errors(InvalidReference, InvalidValue, Conflict))
@inject
async def create_thread(
    body: ThreadCreate,
    caller: CallerDep,
    use_case: Annotated[CreateThread, Depends(Provide[Container.create_thread])],
) -> ThreadOut:
    return ThreadOut.model_validate(await use_case.execute(body.to_command(caller)))


@router.get("", response_model=PageOut[ThreadOut])
@inject
async def list_threads(
    caller: CallerDep,
    page: Annotated[PageRequest, Depends(page_request)],
    use_case: Annotated[ListThreads, Depends(Provide[Container.list_threads])],
    agent_id: Annotated[UUID | None, Query(description="Only threads bound to this agent")] = None,
) -> PageOut[ThreadOut]:
    result = await use_case.execute(caller, page, AgentId(agent_id) if agent_id else None)
    return PageOut[ThreadOut].model_validate(result)


@router.get("/{thread_id}", response_model=ThreadOut, responses=errors(ThreadNotFound))
@inject
async def get_thread(
    thread_id: UUID,
    caller: CallerDep,
    use_case: Annotated[GetThread, Depends(Provide[Container.get_thread])],
) -> ThreadOut:
    return ThreadOut.model_validate(await use_case.execute(caller, ThreadId(thread_id)))


@router.delete(
    "/{thread_id}",
    status_code=204,
    response_class=Response,
    summary="Delete a thread and its messages",
    responses=errors(ThreadNotFound, ThreadBusy, Conflict),
)
@inject
async def delete_thread(
    thread_id: UUID,
    caller: CallerDep,
    use_case: Annotated[DeleteThread, Depends(Provide[Container.delete_thread])],
) -> Response:
    await use_case.execute(caller, ThreadId(thread_id))
    return Response(status_code=204)


@router.post(
    "/{thread_id}/messages",
    status_code=201,
    response_model=MessageOut,
    summary="Append a user message",
    responses=errors(ThreadNotFound, ThreadBusy, InvalidValue, Conflict),
)
@inject
async def append_message(
    thread_id: UUID,
    body: MessageCreate,
    caller: CallerDep,
    use_case: Annotated[AppendUserMessage, Depends(Provide[Container.append_user_message])],
) -> MessageOut:
    command = AppendUserMessageCommand(caller=caller, thread_id=ThreadId(thread_id), content=body.parts())
    return MessageOut.model_validate(await use_case.execute(command))


@router.get(
    "/{thread_id}/messages",
    response_model=PageOut[MessageOut],
    summary="Messages in the order appended",
    responses=errors(ThreadNotFound),
)
@inject
async def list_messages(
    thread_id: UUID,
    caller: CallerDep,
    page: Annotated[PageRequest, Depends(page_request)],
    use_case: Annotated[ListMessages, Depends(Provide[Container.list_messages])],
) -> PageOut[MessageOut]:
    result = await use_case.execute(caller, ThreadId(thread_id), page)
    return PageOut[MessageOut].model_validate(result)
