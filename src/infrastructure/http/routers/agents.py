from typing import Annotated
from uuid import UUID

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Response

from application.errors import AgentNotFound, Conflict, InvalidAgentFile, InvalidReference, SlugTaken
from application.pagination import PageRequest
from application.use_cases.agents import CreateAgent, DeleteAgent, GetAgent, ImportAgent, ListAgents, UpdateAgent
from domain.errors import InvalidValue
from domain.ids import AgentId
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openapi import ApiRoute, errors
from infrastructure.http.schemas.agents import AgentCreate, AgentImportIn, AgentImportOut, AgentOut, AgentUpdate
from infrastructure.http.schemas.common import PageOut, page_request

router = APIRouter(prefix="/v1/agents", tags=["agents"], route_class=ApiRoute)


@router.post(
    "", status_code=201, response_model=AgentOut, responses=errors(InvalidReference, SlugTaken, InvalidValue, Conflict)
)
@inject
async def create_agent(
    body: AgentCreate,
    caller: CallerDep,
    use_case: Annotated[CreateAgent, Depends(Provide[Container.create_agent])],
) -> AgentOut:
    return AgentOut.model_validate(await use_case.execute(body.to_command(caller)))


@router.get("", response_model=PageOut[AgentOut])
@inject
async def list_agents(
    caller: CallerDep,
    page: Annotated[PageRequest, Depends(page_request)],
    use_case: Annotated[ListAgents, Depends(Provide[Container.list_agents])],
) -> PageOut[AgentOut]:
    result = await use_case.execute(caller, page)
    return PageOut[AgentOut].model_validate(result)


@router.get("/{agent_id}", response_model=AgentOut, responses=errors(AgentNotFound))
@inject
async def get_agent(
    agent_id: UUID,
    caller: CallerDep,
    use_case: Annotated[GetAgent, Depends(Provide[Container.get_agent])],
) -> AgentOut:
    return AgentOut.model_validate(await use_case.execute(caller, AgentId(agent_id)))


@router.patch(
    "/{agent_id}",
    response_model=AgentOut,
    summary="Change the fields sent, keep the others",
    responses=errors(AgentNotFound, InvalidReference, SlugTaken, InvalidValue, Conflict),
)
@inject
async def update_agent(
    agent_id: UUID,
    body: AgentUpdate,
    caller: CallerDep,
    use_case: Annotated[UpdateAgent, Depends(Provide[Container.update_agent])],
) -> AgentOut:
    return AgentOut.model_validate(await use_case.execute(body.to_command(caller, agent_id)))


@router.delete("/{agent_id}", status_code=204, response_class=Response, responses=errors(AgentNotFound, Conflict))
@inject
async def delete_agent(
    agent_id: UUID,
    caller: CallerDep,
    use_case: Annotated[DeleteAgent, Depends(Provide[Container.delete_agent])],
) -> Response:
    await use_case.execute(caller, AgentId(agent_id))
    return Response(status_code=204)


@router.post(
    "/import",
    status_code=201,
    response_model=AgentImportOut,
    summary="Create an agent from a ChatMD file, as `threadline agents import` does",
    description="The name and slug come from `file_name`, the instructions from the file's <system> and "
    "<developer> messages, the native tools from those it declares, the model from <config model=...> unless "
    "`model` is given. `warnings` lists what was left out. With `dry_run` nothing is created: the answer is "
    "200 with `agent` null. A document that defines no agent is 422 (InvalidAgentFile, each problem with its line).",
    responses={
        200: {"description": "dry_run: what the agent would be", "model": AgentImportOut},
        **errors(InvalidAgentFile, SlugTaken, InvalidValue, Conflict),
    },
)
@inject
async def import_agent(
    body: AgentImportIn,
    caller: CallerDep,
    response: Response,
    use_case: Annotated[ImportAgent, Depends(Provide[Container.import_agent])],
) -> AgentImportOut:
    imported = await use_case.execute(body.to_command(caller))
    if imported.agent is None:
        response.status_code = 200
    return AgentImportOut.of(imported)
