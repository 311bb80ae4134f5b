"""The OpenAI-compatible front door: every agent of the organization is a model (`model` = the agent's slug)
for the clients that speak the OpenAI API (the `openai` SDKs, Open WebUI, LibreChat, editor plugins...).

Each chat completion or response is a real run of the agent (persisted in a thread, under /v1/runs, traced,
cancellable), named in the `Threadline-Thread-Id` and `Threadline-Run-Id` headers of the answer. Errors take
the OpenAI shape on these routes."""

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any
from uuid import UUID

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Header
from fastapi.responses import JSONResponse, StreamingResponse

from application.caller import Caller
from application.errors import RunNotFound
from application.runs.cancel_run import CancelRun
from application.runs.conversations import (
    AnswerToolCalls,
    AnswerToolCallsCommand,
    Converse,
    ConverseCommand,
    Conversing,
)
from application.runs.follow_run import FollowRun, RunFollower
from application.runs.queries import GetRun
from application.use_cases.agent_models import AgentModels, ListAgentModels
from domain.errors import DomainError
from domain.ids import RunId
from domain.runs import IDEMPOTENCY_KEY_MAX, Run
from infrastructure.container import Container
from infrastructure.http.auth import CallerDep
from infrastructure.http.openai_answers import (
    Events,
    Exchange,
    ResponseRequest,
    chat_chunks,
    chat_completion,
    finished_response,
    outcome_of,
    response_events,
    run_id_of_response,
)
from infrastructure.http.openai_errors import OPENAI_ERRORS, RUN_FAILURES, OpenAiErrorRoute
from infrastructure.http.routers.runs import HEARTBEAT_SECONDS, StoppingDep
from infrastructure.http.schemas.common import ResponseModel
from infrastructure.http.schemas.openai_compat import ChatCompletionIn, ResponseIn

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/v1", tags=["openai"], route_class=OpenAiErrorRoute, responses=OPENAI_ERRORS)

THREAD_HEADER = "Threadline-Thread-Id"
RUN_HEADER = "Threadline-Run-Id"
_RUN_HEADERS = {
    THREAD_HEADER: {"description": "The thread the conversation is kept in", "schema": {"type": "string"}},
    RUN_HEADER: {"description": "The run that answered (see /v1/runs/{id})", "schema": {"type": "string"}},
}
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=IDEMPOTENCY_KEY_MAX,
        description="The same key gives back the same run instead of starting another",
    ),
]
ConverseDep = Annotated[Converse, Depends(Provide[Container.converse])]
AnswerDep = Annotated[AnswerToolCalls, Depends(Provide[Container.answer_tool_calls])]
FollowDep = Annotated[FollowRun, Depends(Provide[Container.follow_run])]
GetRunDep = Annotated[GetRun, Depends(Provide[Container.get_run])]
CancelDep = Annotated[CancelRun, Depends(Provide[Container.cancel_run])]
_cancelling: set[asyncio.Task[None]] = set()
"""Cancellations of runs whose client went away, kept until they are done."""


class ModelOut(ResponseModel):
    """An agent, as a model of the OpenAI-compatible API."""

    id: str
    """The agent's slug: the `model` to send"""
    object: str = "model"
    """Always `model`"""
    created: int
    """When the agent was created (Unix seconds)"""
    owned_by: str
    """The organization's slug"""


class ModelsOut(ResponseModel):
    """The organization's agents as models."""

    object: str = "list"
    """Always `list`"""
    data: list[ModelOut]
    """The models"""


def _models(found: AgentModels) -> list[ModelOut]:
    return [ModelOut(id=a.slug, created=int(a.created_at.timestamp()), owned_by=found.owner) for a in found.agents]


@router.get("/models", response_model=ModelsOut, summary="The organization's agents, as models")
@inject
async def list_models(
    caller: CallerDep, use_case: Annotated[ListAgentModels, Depends(Provide[Container.list_agent_models])]
) -> ModelsOut:
    return ModelsOut(data=_models(await use_case.execute(caller)))


@router.get("/models/{model}", response_model=ModelOut, summary="One agent, as a model")
@inject
async def get_model(
    model: str,
    caller: CallerDep,
    use_case: Annotated[ListAgentModels, Depends(Provide[Container.list_agent_models])],
) -> ModelOut:
    return _models(await use_case.execute(caller, model))[0]


def _answer(json_description: str) -> dict[int | str, dict[str, Any]]:
    return {
        200: {
            "description": json_description,
            "headers": _RUN_HEADERS,
            "content": {"application/json": {}, "text/event-stream": {}},
        }
    }


class _Answering:
    """The run that answers a request, followed from where this answer begins."""

    def __init__(
        self, conversing: Conversing, model: str, follow: FollowRun, get_run: GetRun, cancel: CancelRun, caller: Caller
    ) -> None:
        run = conversing.run
        self.exchange = Exchange(
            run=run, model=model, after_seq=conversing.after_seq, usage_before=conversing.usage_before
        )
        self.headers = {THREAD_HEADER: str(run.thread_id), RUN_HEADER: str(run.id)}
        self._follow, self._get_run, self._cancel, self._caller = follow, get_run, cancel, caller

    async def following(self) -> AbstractAsyncContextManager[RunFollower]:
        # Subscribed before the answer starts, so no event published from here on is missed.
        return await self._follow.execute(self._caller, self.exchange.run.id, self.exchange.after_seq)

    async def final_run(self) -> Run:
        return await self._get_run.execute(self._caller, self.exchange.run.id)

    async def stream(self, render: Callable[[Events], AsyncIterator[str]], stopping: Any) -> StreamingResponse:
        following = await self.following()

        async def frames() -> AsyncIterator[str]:
            answered = False
            try:
                async with following as follower:
                    async for frame in render(follower.events(HEARTBEAT_SECONDS, until=stopping)):
                        yield frame
                answered = True
            finally:
                if not answered and not stopping.is_set():
                    # The client went away before its answer ended (a chat front end's stop button closes the
                    # stream): nobody waits for this run any more, so it is cancelled, as OpenAI's API does.
                    self._cancel_in_background()

        headers = self.headers | {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(frames(), media_type="text/event-stream", headers=headers)

    def _cancel_in_background(self) -> None:
        async def cancel() -> None:
            try:
                await self._cancel.execute(self._caller, self.exchange.run.id)
            except DomainError as error:  # it ended meanwhile, or waits for the client's tools
                logger.debug("run %s not cancelled after its client left: %s", self.exchange.run.id, error)

        task = asyncio.get_running_loop().create_task(cancel())
        _cancelling.add(task)
        task.add_done_callback(_cancelling.discard)

    async def answered(self, render: Callable[[Any, Run], dict[str, Any]], stopping: Any) -> JSONResponse:
        async with await self.following() as follower:
            outcome = await outcome_of(follower.events(HEARTBEAT_SECONDS, until=stopping))
        return JSONResponse(render(outcome, await self.final_run()), headers=self.headers)


async def _one_of(*attempts: Callable[[], Awaitable[Conversing | None]]) -> Conversing:
    for attempt in attempts:
        found = await attempt()
        if found is not None:
            return found
    raise AssertionError("the last attempt always answers")


@router.post(
    "/chat/completions",
    response_model=None,
    summary="Chat Completions: the agent named by `model` answers the conversation",
    description=(
        "The messages become a run of the agent: system and developer messages are added to its instructions "
        "for this run only, the others are the thread's history. The agent's own tools run inside; `tools` "
        "declared here are the client's: the run pauses and the answer carries `tool_calls` "
        "(`finish_reason: tool_calls`). The next request, ending with the `tool` messages that answer those "
        "calls, resumes that same run (found by the calls' ids). With `stream: true`, `chat.completion.chunk` "
        "server-sent events and `data: [DONE]` (usage in a last chunk with `stream_options.include_usage`)."
    ),
    responses=_answer("A `chat.completion` object, or with `stream: true` a text/event-stream of chunks")
    | RUN_FAILURES,
)
@inject
async def chat_completions(
    body: ChatCompletionIn,
    caller: CallerDep,
    converse: ConverseDep,
    answer: AnswerDep,
    follow: FollowDep,
    get_run: GetRunDep,
    cancel: CancelDep,
    stopping: StoppingDep,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse | StreamingResponse:
    results = body.tool_results()

    async def resume() -> Conversing | None:
        return await answer.execute(AnswerToolCallsCommand(caller=caller, results=results)) if results else None

    async def start() -> Conversing:
        command = ConverseCommand(
            caller=caller,
            agent_slug=body.model,
            turns=body.turns(),
            instructions=body.instructions(),
            client_tools=body.client_tools(),
            thread_metadata={"api": "chat.completions"},
            idempotency_key=idempotency_key,
        )
        return await converse.execute(command)

    answering = _Answering(await _one_of(resume, start), body.model, follow, get_run, cancel, caller)
    exchange = answering.exchange
    if body.stream:
        return await answering.stream(
            lambda events: chat_chunks(exchange, events, answering.final_run, include_usage=body.include_usage),
            stopping,
        )
    return await answering.answered(lambda outcome, run: chat_completion(exchange, outcome, run), stopping)


def _previous_run(response_id: str | None) -> RunId | None:
    if response_id is None:
        return None
    try:
        return RunId(UUID(hex=run_id_of_response(response_id)))
    except ValueError:
        raise RunNotFound(f"previous response {response_id!r} not found") from None


@router.post(
    "/responses",
    response_model=None,
    summary="Responses: the agent named by `model` answers the input",
    description=(
        "`input` (text or items) becomes a run of the agent; `instructions` and system messages are added to its "
        "instructions for this run only. `previous_response_id` continues that response's thread, or resumes its "
        "run when the input holds the `function_call_output` items it waits for. Function `tools` declared here are "
        "the client's: the run pauses and the response carries `function_call` items. With `stream: true`, the "
        "Responses streaming events (response.created, response.output_text.delta, response.completed...). "
        "`store` is repeated in the response: every response is a run Threadline keeps."
    ),
    responses=_answer("A `response` object, or with `stream: true` a text/event-stream of response events"),
)
@inject
async def create_response(
    body: ResponseIn,
    caller: CallerDep,
    converse: ConverseDep,
    answer: AnswerDep,
    follow: FollowDep,
    get_run: GetRunDep,
    cancel: CancelDep,
    stopping: StoppingDep,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse | StreamingResponse:
    previous = _previous_run(body.previous_response_id)
    results = body.tool_results()
    client_tools = body.client_tools()

    async def resume() -> Conversing | None:
        if not results:
            return None
        return await answer.execute(AnswerToolCallsCommand(caller=caller, results=results, run_id=previous))

    async def start() -> Conversing:
        command = ConverseCommand(
            caller=caller,
            agent_slug=body.model,
            turns=body.turns(),
            instructions=body.all_instructions(),
            client_tools=client_tools,
            continues=previous,
            thread_metadata={"api": "responses"},
            idempotency_key=idempotency_key,
        )
        return await converse.execute(command)

    answering = _Answering(await _one_of(resume, start), body.model, follow, get_run, cancel, caller)
    exchange = answering.exchange
    request = ResponseRequest(
        instructions=body.instructions,
        previous_response_id=body.previous_response_id,
        store=body.store,
        tools=[t.model_dump(exclude_none=True) for t in body.tools],
    )
    if body.stream:
        return await answering.stream(
            lambda events: response_events(exchange, request, events, answering.final_run), stopping
        )
    return await answering.answered(lambda outcome, run: finished_response(exchange, request, outcome, run), stopping)
