from typing import Annotated

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Path, Response

from application.errors import Conflict, InvalidReference, PermissionDenied, PromptTemplateNotFound
from application.use_cases.prompt_templates import (
    CreatePromptTemplate,
    DeletePromptTemplate,
    GetPromptTemplate,
    ListPromptTemplates,
    RenderCommand,
    RenderDraftTemplate,
    RenderPromptTemplate,
    TemplateView,
    UpdatePromptTemplate,
)
from domain.errors import InvalidValue
from domain.prompt_templates import MissingArguments
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openapi import ApiRoute, errors
from infrastructure.http.schemas.integrations import CatalogOut
from infrastructure.http.schemas.prompt_templates import (
    DraftRenderIn,
    RenderIn,
    RenderOut,
    TemplateCreate,
    TemplateOut,
    TemplateUpdate,
)

router = APIRouter(prefix="/v1/prompt-templates", tags=["prompt templates"], route_class=ApiRoute)
TemplateName = Annotated[str, Path(max_length=64)]


@router.post(
    "",
    status_code=201,
    response_model=TemplateOut,
    summary="Create a template (admin)",
    responses=errors(PermissionDenied, InvalidReference, InvalidValue, Conflict),
)
@inject
async def create_template(
    body: TemplateCreate,
    caller: CallerDep,
    use_case: Annotated[CreatePromptTemplate, Depends(Provide[Container.create_prompt_template])],
) -> TemplateOut:
    return TemplateOut.of(TemplateView(template=await use_case.execute(body.to_command(caller))))


@router.get(
    "", response_model=CatalogOut[TemplateOut], summary="The organization's templates and its prompts directory's"
)
@inject
async def list_templates(
    caller: CallerDep,
    use_case: Annotated[ListPromptTemplates, Depends(Provide[Container.list_prompt_templates])],
) -> CatalogOut[TemplateOut]:
    return CatalogOut(data=[TemplateOut.of(v) for v in await use_case.execute(caller)])


@router.get("/{name}", response_model=TemplateOut, responses=errors(PromptTemplateNotFound))
@inject
async def get_template(
    name: TemplateName,
    caller: CallerDep,
    use_case: Annotated[GetPromptTemplate, Depends(Provide[Container.get_prompt_template])],
) -> TemplateOut:
    return TemplateOut.of(await use_case.execute(caller, name))


@router.patch(
    "/{name}",
    response_model=TemplateOut,
    summary="Change a template (admin)",
    responses=errors(PermissionDenied, PromptTemplateNotFound, InvalidReference, InvalidValue, Conflict),
)
@inject
async def update_template(
    name: TemplateName,
    body: TemplateUpdate,
    caller: CallerDep,
    use_case: Annotated[UpdatePromptTemplate, Depends(Provide[Container.update_prompt_template])],
) -> TemplateOut:
    return TemplateOut.of(TemplateView(template=await use_case.execute(caller, name, body.changes())))


@router.delete(
    "/{name}",
    status_code=204,
    response_class=Response,
    summary="Delete a template (admin)",
    responses=errors(PermissionDenied, PromptTemplateNotFound, Conflict),
)
@inject
async def delete_template(
    name: TemplateName,
    caller: CallerDep,
    use_case: Annotated[DeletePromptTemplate, Depends(Provide[Container.delete_prompt_template])],
) -> Response:
    await use_case.execute(caller, name)
    return Response(status_code=204)


@router.post(
    "/{name}/render",
    response_model=RenderOut,
    summary="The messages with the arguments substituted",
    responses=errors(PromptTemplateNotFound, MissingArguments, InvalidValue),
)
@inject
async def render_template(
    name: TemplateName,
    body: RenderIn,
    caller: CallerDep,
    use_case: Annotated[RenderPromptTemplate, Depends(Provide[Container.render_prompt_template])],
) -> RenderOut:
    messages = await use_case.execute(RenderCommand(caller=caller, name=name, arguments=body.arguments))
    return RenderOut.model_validate({"messages": messages})


@router.post(
    "/preview",
    response_model=RenderOut,
    summary="Render a template that is not saved (a draft), as the saved one would render",
    description="Nothing is stored. The draft is checked as a saved template is (422 when it is not valid), "
    "then rendered with the arguments (422 when a required one is missing).",
    responses=errors(MissingArguments, InvalidValue),
)
@inject
async def preview_template(
    body: DraftRenderIn,
    caller: CallerDep,
    use_case: Annotated[RenderDraftTemplate, Depends(Provide[Container.render_draft_template])],
) -> RenderOut:
    return RenderOut.model_validate({"messages": await use_case.execute(body.to_command(caller))})
