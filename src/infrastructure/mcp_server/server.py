"""Threadline as an MCP server: an organization's published agents and prompt templates, over the
`mcp` SDK's low-level server. Every handler acts for the caller the HTTP layer authenticated."""

import logging
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, PromptsListChanged, ToolsListChanged
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from application.caller import Caller
from application.errors import PublishedNotFound
from application.use_cases.mcp_publishing import (
    CallPublishedTool,
    CompleteArgument,
    GetPublishedPrompt,
    ListPublished,
    ToolCall,
)
from domain.ids import OrgId

logger = logging.getLogger(__name__)

SERVER_NAME = "threadline"
SERVER_VERSION = "0.1.0"
INSTRUCTIONS = "Tools and prompts of one Threadline organization: its published agents and its prompt templates."


def caller_of(ctx: Any) -> Caller:
    caller = getattr(getattr(getattr(ctx, "request", None), "state", None), "caller", None)
    if not isinstance(caller, Caller):
        # The HTTP layer refuses unauthenticated requests before they get here.
        raise MCPError(types.INVALID_REQUEST, "not authenticated")
    return caller


class PublishingServer:
    """Builds the MCP server and tells an organization's clients when its tools or prompts change."""

    def __init__(
        self,
        *,
        list_published: Callable[[], ListPublished],
        call_tool: Callable[[], CallPublishedTool],
        get_prompt: Callable[[], GetPublishedPrompt],
        complete: Callable[[], CompleteArgument],
    ) -> None:
        self._list, self._call, self._get, self._complete = list_published, call_tool, get_prompt, complete
        self._buses: dict[OrgId, InMemorySubscriptionBus] = {}
        self._listeners: dict[OrgId, ListenHandler] = {}
        self._sessions: dict[OrgId, weakref.WeakSet[ServerSession]] = {}
        self.server: Server[Any] = self._build()

    def _seen(self, ctx: Any, caller: Caller) -> None:
        """Remember handshake-era sessions, to send them list_changed notifications later."""
        session = getattr(ctx, "session", None)
        if isinstance(session, ServerSession) and session.client_params is not None:
            self._sessions.setdefault(caller.org_id, weakref.WeakSet()).add(session)

    def _build(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            caller = caller_of(ctx)
            self._seen(ctx, caller)
            catalog = await self._list().execute(caller)
            return types.ListToolsResult(
                tools=[
                    types.Tool(name=t.name, description=t.description, input_schema=dict(t.input_schema))
                    for t in catalog.tools
                ]
            )

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            caller = caller_of(ctx)

            async def progress(value: float, message: str) -> None:
                try:
                    await ctx.session.report_progress(value, 1.0, message)
                except Exception:  # a client that went away must not fail the run
                    logger.debug("could not send a progress notification", exc_info=True)

            try:
                answer = await self._call().execute(
                    ToolCall(caller=caller, name=params.name, arguments=params.arguments or {}, progress=progress)
                )
            except PublishedNotFound as error:
                raise MCPError(types.INVALID_PARAMS, error.detail) from None
            meta = (
                {"threadline/run_id": str(answer.run.id), "threadline/thread_id": str(answer.run.thread_id)}
                if answer.run
                else None
            )
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=answer.text)], is_error=answer.is_error, _meta=meta
            )

        async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
            caller = caller_of(ctx)
            self._seen(ctx, caller)
            catalog = await self._list().execute(caller)
            return types.ListPromptsResult(
                prompts=[
                    types.Prompt(
                        name=p.name,
                        description=p.description,
                        arguments=[
                            types.PromptArgument(name=a.name, description=a.description or None, required=a.required)
                            for a in p.arguments
                        ],
                    )
                    for p in catalog.prompts
                ]
            )

        async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
            caller = caller_of(ctx)
            try:
                result = await self._get().execute(caller, params.name, params.arguments or {})
            except PublishedNotFound as error:
                raise MCPError(types.INVALID_PARAMS, error.detail) from None
            return types.GetPromptResult(
                description=result.description,
                messages=[
                    types.PromptMessage(
                        role="assistant" if m.role == "assistant" else "user",
                        content=types.TextContent(type="text", text=m.content),
                    )
                    for m in result.messages
                ],
            )

        async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
            caller = caller_of(ctx)
            values: list[str] = []
            if isinstance(params.ref, types.PromptReference):
                values = await self._complete().execute(
                    caller, params.ref.name, params.argument.name, params.argument.value
                )
            return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))

        async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
            caller_of(ctx)
            return types.ListResourcesResult(resources=[])

        async def subscribe(ctx: Any, params: Any) -> types.EmptyResult:
            caller_of(ctx)
            return types.EmptyResult()

        async def set_logging_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
            caller_of(ctx)  # nothing is logged to clients; the level is accepted for older clients that set it
            return types.EmptyResult()

        async def listen(ctx: Any, params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
            caller = caller_of(ctx)
            handler = self._listeners.get(caller.org_id)
            if handler is None:
                bus = self._buses.setdefault(caller.org_id, InMemorySubscriptionBus())
                handler = self._listeners.setdefault(caller.org_id, ListenHandler(bus))
            return await handler(ctx, params)

        with warnings.catch_warnings():
            # Handshake-era clients (2025-11-25) still set a log level; the SDK warns that it is deprecated.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            return Server(
                SERVER_NAME,
                version=SERVER_VERSION,
                instructions=INSTRUCTIONS,
                on_list_tools=list_tools,
                on_call_tool=call_tool,
                on_list_prompts=list_prompts,
                on_get_prompt=get_prompt,
                on_completion=complete,
                on_list_resources=list_resources,
                on_subscribe_resource=subscribe,
                on_unsubscribe_resource=subscribe,
                on_subscriptions_listen=listen,
                on_set_logging_level=set_logging_level,
            )

    async def catalog_changed(self, org_id: OrgId | None = None) -> None:
        """Tell clients (of one organization, or of all) that tools and prompts changed."""
        orgs = [org_id] if org_id is not None else list({*self._buses, *self._sessions})
        for org in orgs:
            bus = self._buses.get(org)
            if bus is not None:
                await bus.publish(ToolsListChanged())
                await bus.publish(PromptsListChanged())
            for session in list(self._sessions.get(org, ())):
                try:
                    await session.send_tool_list_changed()
                    await session.send_prompt_list_changed()
                except Exception:  # a session that ended meanwhile
                    self._sessions[org].discard(session)

    def close(self) -> None:
        for handler in self._listeners.values():
            handler.close()
