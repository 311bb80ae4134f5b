from typing import Annotated
from uuid import UUID

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Response

from application.pagination import PageRequest
from application.use_cases.agents import CreateAgent, DeleteAgent, GetAgent, ListAgents, UpdateAgent
from domain.ids import AgentId
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.errors import STORAGE_ERRORS
from infrastructure.http.schemas.agents import AgentCreate, AgentOut, AgentUpdate
from infrastructure.http.schemas.common import PageOut, page_request

router = APIRouter(prefix="/v1/agents", tags=["agents"], responses=STORAGE_ERRORS)


@router.post("", status_code=201, response_model=AgentOut)
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


@router.get("/{agent_id}", response_model=AgentOut)
@inject
async def get_agent(
    agent_id: UUID,
    caller: CallerDep,
    use_case: Annotated[GetAgent, Depends(Provide[Container.get_agent])],
) -> AgentOut:
    return AgentOut.model_validate(await use_case.execute(caller, AgentId(agent_id)))


@router.patch("/{agent_id}", response_model=AgentOut, summary="Change the fields sent, keep the others")
@inject
async def update_agent(
    agent_id: UUID,
    body: AgentUpdate,
    caller: CallerDep,
    use_case: Annotated[UpdateAgent, Depends(Provide[Container.update_agent])],
) -> AgentOut:
    return AgentOut.model_validate(await use_case.execute(body.to_command(caller, agent_id)))


@router.delete("/{agent_id}", status_code=204, response_class=Response)
@inject
async def delete_agent(
    agent_id: UUID,
    caller: CallerDep,
    use_case: Annotated[DeleteAgent, Depends(Provide[Container.delete_agent])],
) -> Response:
    await use_case.execute(caller, AgentId(agent_id))
    return Response(status_code=204)
