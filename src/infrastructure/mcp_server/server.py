"""Threadline as an MCP server: an organization's published agents and prompt templates, over the
`mcp` SDK's low-level server. Every handler acts for the caller the HTTP layer authenticated."""

import logging
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, PromptsListChanged, ToolsListChanged
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request

from application.caller import Caller
from application.errors import PublishedNotFound
from application.use_cases.mcp_publishing import (
    CallPublishedTool,
    CompleteArgument,
    GetPublishedPrompt,
    ListPublished,
    PublishedPrompt,
    PublishedTool,
    ToolAnswer,
    ToolCall,
)
from domain.errors import InvalidValue
from domain.ids import OrgId
from domain.mcp_prompts import PromptResult
from infrastructure.http.text_guard import NUL_REFUSED, nul_location

logger = logging.getLogger(__name__)

SERVER_NAME = "threadline"
SERVER_VERSION = "0.1.0"
INSTRUCTIONS = "Tools and prompts of one Threadline organization: its published agents and its prompt templates."

Lifespan = dict[str, Any]
"""What the SDK's default lifespan yields (an empty dict); the server keeps no state in it."""

Context = ServerRequestContext[Lifespan, Request]
"""A request's context: over Streamable HTTP the SDK attaches the Starlette request the endpoint saw."""


def caller_of(ctx: Context) -> Caller:
    """The caller the endpoint put in the request's state after checking its API key."""
    caller = getattr(ctx.request.state, "caller", None) if ctx.request is not None else None
    if not isinstance(caller, Caller):
        # The HTTP layer refuses unauthenticated requests before they get here.
        raise MCPError(types.INVALID_REQUEST, "not authenticated")
    return caller


def _tool(tool: PublishedTool) -> types.Tool:
    return types.Tool(name=tool.name, description=tool.description, input_schema=dict(tool.input_schema))


def _prompt(prompt: PublishedPrompt) -> types.Prompt:
    arguments = [
        types.PromptArgument(name=a.name, description=a.description or None, required=a.required)
        for a in prompt.arguments
    ]
    return types.Prompt(name=prompt.name, description=prompt.description, arguments=arguments)


def _prompt_result(result: PromptResult) -> types.GetPromptResult:
    messages = [
        types.PromptMessage(
            role="assistant" if m.role == "assistant" else "user",
            content=types.TextContent(type="text", text=m.content),
        )
        for m in result.messages
    ]
    return types.GetPromptResult(description=result.description, messages=messages)


def _tool_result(answer: ToolAnswer) -> types.CallToolResult:
    run = answer.run
    meta = {"threadline/run_id": str(run.id), "threadline/thread_id": str(run.thread_id)} if run else None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=answer.text)], is_error=answer.is_error, _meta=meta
    )


@dataclass(frozen=True)
class _SessionProgress:
    """A tool call's progress, sent to the client that made the call."""

    session: ServerSession

    async def __call__(self, value: float, message: str) -> None:
        try:
            await self.session.report_progress(value, 1.0, message)
        except Exception:  # a client that went away must not fail the run
            logger.debug("could not send a progress notification", exc_info=True)


def _invalid_params(method: str, detail: str) -> MCPError:
    # The client's mistake, not the server's: said to the client, and logged without a traceback.
    logger.info("MCP request refused: %s", detail, extra={"method": method})
    return MCPError(types.INVALID_PARAMS, detail)


async def refuse_bad_input(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: what the REST API answers with a 422 is a JSON-RPC invalid-params error here.
    A NUL character anywhere in the parameters is refused before any handler sees them (the rule of
    the REST API's text guard); a value an entity refuses (too long, say) is refused with its reason."""
    where = nul_location(ctx.params or {}, ("params",))
    if where is not None:
        raise _invalid_params(ctx.method, f"{where}: {NUL_REFUSED}")
    try:
        return await call_next(ctx)
    except InvalidValue as error:
        raise _invalid_params(ctx.method, error.detail) from None


def connection_of(session: ServerSession) -> Connection:
    """The client connection a request came on. mcp 2.3.0's per-request `ServerSession` does not expose it
    publicly; the connection lives as long as the client's session, where the per-request proxy does not."""
    connection: Connection = session._connection
    return connection


class CatalogNotifier:
    """Who to tell, per organization, that its tools or prompts changed: clients listening on a
    subscription stream (2026-07-28 and later) and the connections of handshake-era clients (2025-11-25
    and older), whose notifications go out on their standalone GET stream."""

    def __init__(self) -> None:
        self._buses: dict[OrgId, InMemorySubscriptionBus] = {}
        self._listeners: dict[OrgId, ListenHandler] = {}
        self._connections: dict[OrgId, weakref.WeakSet[Connection]] = {}

    def seen(self, org_id: OrgId, ctx: ServerRequestContext[Any, Any]) -> None:
        """Remember a handshake-era client's connection, to send it list_changed notifications later."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        connections = self._connections.setdefault(org_id, weakref.WeakSet())
        connection = connection_of(ctx.session)
        if connection not in connections:
            connections.add(connection)
            connection.exit_stack.callback(connections.discard, connection)

    async def listen(
        self, org_id: OrgId, ctx: Context, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        handler = self._listeners.get(org_id)
        if handler is None:
            bus = self._buses.setdefault(org_id, InMemorySubscriptionBus())
            handler = self._listeners.setdefault(org_id, ListenHandler(bus))
        return await handler(ctx, params)

    async def changed(self, org_id: OrgId | None = None) -> None:
        orgs = [org_id] if org_id is not None else list({*self._buses, *self._connections})
        for org in orgs:
            bus = self._buses.get(org)
            if bus is not None:
                await bus.publish(ToolsListChanged())
                await bus.publish(PromptsListChanged())
            for connection in list(self._connections.get(org, ())):
                try:
                    await connection.send_tool_list_changed()
                    await connection.send_prompt_list_changed()
                except Exception:  # a connection that ended meanwhile
                    self._connections[org].discard(connection)

    def close(self) -> None:
        for handler in self._listeners.values():
            handler.close()


class PublishingServer:
    """The MCP server's request handlers, and the way to tell an organization's clients when its tools or
    prompts change."""

    def __init__(
        self,
        *,
        list_published: Callable[[], ListPublished],
        call_tool: Callable[[], CallPublishedTool],
        get_prompt: Callable[[], GetPublishedPrompt],
        complete: Callable[[], CompleteArgument],
    ) -> None:
        self._list, self._call, self._get, self._complete = list_published, call_tool, get_prompt, complete
        self._notifier = CatalogNotifier()
        self.server: Server[Lifespan] = self._server()

    def _server(self) -> Server[Lifespan]:
        with warnings.catch_warnings():
            # Handshake-era clients (2025-11-25) still set a log level; the SDK warns that it is deprecated.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server: Server[Lifespan] = Server(
                SERVER_NAME,
                version=SERVER_VERSION,
                instructions=INSTRUCTIONS,
                on_list_tools=self.list_tools,
                on_call_tool=self.call_tool,
                on_list_prompts=self.list_prompts,
                on_get_prompt=self.get_prompt,
                on_completion=self.complete,
                on_list_resources=self.list_resources,
                on_list_resource_templates=self.list_resource_templates,
                on_read_resource=self.read_resource,
                on_subscribe_resource=self.subscribe,
                on_unsubscribe_resource=self.subscribe,
                on_subscriptions_listen=self.listen,
                on_set_logging_level=self.set_logging_level,
            )
        server.middleware.append(self.remember_client)
        server.middleware.append(refuse_bad_input)
        return server

    async def remember_client(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        """Server middleware: a handshake-era client is told of catalog changes from its first message on
        (`notifications/initialized` included), whether or not it ever lists tools or prompts."""
        result = await call_next(ctx)
        caller = getattr(ctx.request.state, "caller", None) if ctx.request is not None else None
        if isinstance(caller, Caller):
            self._notifier.seen(caller.org_id, ctx)
        return result

    async def list_tools(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        caller = caller_of(ctx)
        catalog = await self._list().execute(caller)
        return types.ListToolsResult(tools=[_tool(t) for t in catalog.tools])

    async def call_tool(self, ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        call = ToolCall(
            caller=caller_of(ctx),
            name=params.name,
            arguments=params.arguments or {},
            progress=_SessionProgress(ctx.session),
        )
        try:
            answer = await self._call().execute(call)
        except PublishedNotFound as error:
            raise MCPError(types.INVALID_PARAMS, error.detail) from None
        return _tool_result(answer)

    async def list_prompts(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        caller = caller_of(ctx)
        catalog = await self._list().execute(caller)
        return types.ListPromptsResult(prompts=[_prompt(p) for p in catalog.prompts])

    async def get_prompt(self, ctx: Context, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        caller = caller_of(ctx)
        try:
            result = await self._get().execute(caller, params.name, params.arguments or {})
        except PublishedNotFound as error:
            raise MCPError(types.INVALID_PARAMS, error.detail) from None
        return _prompt_result(result)

    async def complete(self, ctx: Context, params: types.CompleteRequestParams) -> types.CompleteResult:
        caller = caller_of(ctx)
        values: list[str] = []
        if isinstance(params.ref, types.PromptReference):
            values = await self._complete().execute(
                caller, params.ref.name, params.argument.name, params.argument.value
            )
        return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))

    async def list_resources(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        caller_of(ctx)
        return types.ListResourcesResult(resources=[])

    async def list_resource_templates(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        caller_of(ctx)
        return types.ListResourceTemplatesResult(resource_templates=[])

    async def read_resource(self, ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        caller_of(ctx)
        # There are no resources: an unknown URI is invalid params carrying the URI (SEP-2164, 2026-07-28).
        uri = str(params.uri)
        raise MCPError(types.INVALID_PARAMS, f"no resource {uri!r}", data={"uri": uri})

    async def subscribe(
        self, ctx: Context, params: types.SubscribeRequestParams | types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        caller_of(ctx)  # there are no resources; (un)subscribing to one is accepted and changes nothing
        return types.EmptyResult()

    async def set_logging_level(self, ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
        caller_of(ctx)  # nothing is logged to clients; the level is accepted for older clients that set it
        return types.EmptyResult()

    async def listen(
        self, ctx: Context, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        return await self._notifier.listen(caller_of(ctx).org_id, ctx, params)

    async def catalog_changed(self, org_id: OrgId | None = None) -> None:
        """Tell clients (of one organization, or of all) that tools and prompts changed."""
        await self._notifier.changed(org_id)

    def close(self) -> None:
        self._notifier.close()
