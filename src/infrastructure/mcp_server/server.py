"""Threadline as an MCP server: an organization's published agents and prompt templates, over the
`mcp` SDK's low-level server. Every handler acts for the caller the HTTP layer authenticated."""

import base64
import json
import logging
import re
import warnings
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import mcp_types as types
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request

from application.caller import Caller
from application.errors import InvalidCursor, NotFound, PublishedNotFound, SourceNotFound
from application.pagination import PageRequest
from application.ports.persistence import SourceSummary
from application.runs.answer_questions import QuestionAnswer
from application.use_cases.mcp_publishing import (
    CallPublishedTool,
    CompleteArgument,
    GetPublishedPrompt,
    ListPublished,
    PublishedPrompt,
    PublishedTool,
    ResumedCall,
    ToolAnswer,
    ToolCall,
)
from application.use_cases.sources import GetSource, ListSources
from domain.elicitation import Elicitation, ElicitationAction, ElicitationAnswer
from domain.errors import InvalidValue
from domain.ids import AgentId, OrgId, RunId, SourceId, ThreadId
from domain.mcp_prompts import PromptResult
from domain.sources import Source, SourceKind
from infrastructure.http.text_guard import NUL_REFUSED, nul_location

logger = logging.getLogger(__name__)

SERVER_NAME = "threadline"
SERVER_VERSION = "0.1.0"
INSTRUCTIONS = (
    "Tools, prompts and resources of one Threadline organization: its published agents, its prompt templates, and "
    "the sources of its threads and agents (threadline://sources/{source_id}; the sources of one thread or agent: "
    "threadline://threads/{thread_id}/sources, threadline://agents/{agent_id}/sources)."
)
SOURCE_URI_PREFIX = "threadline://sources/"
SOURCE_PAGE = 100
"""Sources per resources/list page"""
OWNED_SOURCES = re.compile(r"^threadline://(threads|agents)/([^/]+)/sources$")
"""A thread's or an agent's sources, as one resource: what they are, as JSON"""
OWNED_SOURCES_MAX = 1_000
"""At most this many sources are listed in a thread's or agent's sources resource"""


def source_uri(source_id: SourceId) -> str:
    return f"{SOURCE_URI_PREFIX}{source_id}"


def _source_id(uri: str) -> SourceId | None:
    if not uri.startswith(SOURCE_URI_PREFIX):
        return None
    try:
        return SourceId(UUID(uri[len(SOURCE_URI_PREFIX) :]))
    except ValueError:
        return None


def _resource(source: SourceSummary) -> types.Resource:
    owner = f"thread {source.thread_id}" if source.thread_id is not None else f"agent {source.agent_id}"
    return types.Resource(
        uri=source_uri(source.id),
        name=source.name,
        description=f"A {source.kind.value} source of {owner} ({source.origin.type})",
        mime_type=_mime_type(source.kind, source.mime_type),
        size=source.size,
    )


def _mime_type(kind: SourceKind, mime_type: str | None) -> str:
    if kind is SourceKind.DATA:
        return "text/csv"  # a table is read as CSV
    return mime_type or ("text/plain" if kind is SourceKind.TEXT else "application/octet-stream")


def _contents(uri: str, source: Source) -> types.TextResourceContents | types.BlobResourceContents:
    mime_type = _mime_type(source.kind, source.mime_type)
    if source.blob is not None:
        return types.BlobResourceContents(uri=uri, mime_type=mime_type, blob=base64.b64encode(source.blob).decode())
    return types.TextResourceContents(uri=uri, mime_type=mime_type, text=source.readable_text or "")


def _unknown_resource(uri: str) -> MCPError:
    # An unknown URI is invalid params carrying the URI (SEP-2164, 2026-07-28); another tenant's source too.
    return MCPError(types.INVALID_PARAMS, f"no resource {uri!r}", data={"uri": uri})


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


class _AnnouncingServer(Server[Lifespan]):
    """Says to handshake-era clients what it does: tell them when the tools, prompts and resources change (the
    SDK's session manager takes the default options, in which no list changes are announced)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        announced = notification_options or NotificationOptions(
            prompts_changed=True, resources_changed=True, tools_changed=True
        )
        return super().create_initialization_options(announced, experimental_capabilities, extensions)


RUN_STATE = "threadline-run:"
"""The request state of an InputRequiredResult of a published agent: the run that waits for the answers."""


def _input_required(answer: ToolAnswer) -> types.InputRequiredResult:
    """The questions of the run the call left waiting, for a 2026-07-28 client to answer in a call of its own."""
    assert answer.run is not None
    return types.InputRequiredResult(
        input_requests={
            q.id: types.ElicitRequest(
                params=types.ElicitRequestFormParams(message=q.message, requested_schema=dict(q.requested_schema))
            )
            for q in answer.questions
        },
        request_state=f"{RUN_STATE}{answer.run.id}",
    )


def _resumed(params: types.CallToolRequestParams) -> ResumedCall:
    """The run an earlier call left waiting, and the client's answers to its questions."""
    state = params.request_state or ""
    try:
        run_id = RunId(UUID(state.removeprefix(RUN_STATE))) if state.startswith(RUN_STATE) else None
    except ValueError:
        run_id = None
    if run_id is None:
        raise MCPError(types.INVALID_PARAMS, "requestState is not one this server gave")
    answers = [
        QuestionAnswer(question_id=key, action=ElicitationAction(result.action), content=result.content)
        for key, result in (params.input_responses or {}).items()
        if isinstance(result, types.ElicitResult)
    ]
    return ResumedCall(run_id=run_id, answers=answers)


@dataclass(frozen=True)
class _SessionAnswerer:
    """Asks a handshake-era client (one that declared elicitation) the questions of the run its call started."""

    session: ServerSession
    request_id: types.RequestId | None

    async def __call__(self, questions: Sequence[Elicitation]) -> list[tuple[str, ElicitationAnswer]]:
        answers = []
        for question in questions:
            try:
                result = await self.session.elicit_form(
                    question.message, dict(question.requested_schema), related_request_id=self.request_id
                )
                answer = ElicitationAnswer(action=ElicitationAction(result.action), content=result.content)
            except MCPError:
                logger.info("an MCP client could not answer a question", exc_info=True)
                answer = ElicitationAnswer(action=ElicitationAction.CANCEL)
            answers.append((question.id, answer))
        return answers


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
        self._subscribed: dict[OrgId, dict[str, weakref.WeakSet[Connection]]] = {}
        """Handshake-era connections subscribed to a resource, by URI"""
        self._listened: dict[OrgId, Counter[str]] = {}
        """Resources that open `subscriptions/listen` streams follow, with how many streams follow each"""

    def subscribe(self, org_id: OrgId, uri: str, ctx: ServerRequestContext[Any, Any]) -> None:
        connections = self._subscribed.setdefault(org_id, {}).setdefault(uri, weakref.WeakSet())
        connection = connection_of(ctx.session)
        if connection not in connections:
            connections.add(connection)
            connection.exit_stack.callback(connections.discard, connection)

    def unsubscribe(self, org_id: OrgId, uri: str, ctx: ServerRequestContext[Any, Any]) -> None:
        self._subscribed.get(org_id, {}).get(uri, weakref.WeakSet()).discard(connection_of(ctx.session))

    async def sources_changed(self, org_id: OrgId | None, uris: Sequence[str] | None) -> None:
        """Resources were added, replaced or deleted: listing clients are told the list changed, those
        subscribed to the resources (uris None: to any) that they were updated."""
        orgs = [org_id] if org_id is not None else list({*self._buses, *self._connections, *self._subscribed})
        if uris is not None and not uris:
            return
        for org in orgs:
            subscribed = self._subscribed.get(org, {})
            updated = list(subscribed) if uris is None else [u for u in uris if u in subscribed]
            bus = self._buses.get(org)
            if bus is not None:
                await bus.publish(ResourcesListChanged())
                for uri in uris if uris is not None else list(self._listened.get(org, ())):
                    await bus.publish(ResourceUpdated(uri=uri))
            for connection in list(self._connections.get(org, ())):
                await self._send(connection, org, connection.send_resource_list_changed())
            for uri in updated:
                for connection in list(subscribed.get(uri, ())):
                    await self._send(connection, org, connection.send_resource_updated(uri))

    async def _send(self, connection: Connection, org: OrgId, notification: Awaitable[None]) -> None:
        try:
            await notification
        except Exception:  # a connection that ended meanwhile
            self._connections.get(org, weakref.WeakSet()).discard(connection)

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
        # Which resources listening streams follow, while they are open: a change of sources not known one by
        # one (a thread deleted with its sources) tells each of them it was updated.
        uris = list(params.notifications.resource_subscriptions or ())
        listened = self._listened.setdefault(org_id, Counter())
        listened.update(uris)
        try:
            return await handler(ctx, params)
        finally:
            listened.subtract(uris)
            for uri in uris:
                if listened[uri] <= 0:
                    del listened[uri]

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
        list_sources: Callable[[], ListSources],
        get_source: Callable[[], GetSource],
    ) -> None:
        self._list, self._call, self._get, self._complete = list_published, call_tool, get_prompt, complete
        self._list_sources, self._get_source = list_sources, get_source
        self._notifier = CatalogNotifier()
        self.server: Server[Lifespan] = self._server()

    def _server(self) -> Server[Lifespan]:
        with warnings.catch_warnings():
            # Handshake-era clients (2025-11-25) still set a log level; the SDK warns that it is deprecated.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server: Server[Lifespan] = _AnnouncingServer(
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
                on_unsubscribe_resource=self.unsubscribe,
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

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A published agent's run whose tools ask the user questions: a 2026-07-28 client gets them as an
        InputRequiredResult (the run waits; the client calls again with the answers and the state); a
        handshake-era client that can be asked gets `elicitation/create` during the call."""
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        can_ask = not modern and ctx.session.check_client_capability(
            types.ClientCapabilities(elicitation=types.ElicitationCapability())
        )
        call = ToolCall(
            caller=caller_of(ctx),
            name=params.name,
            arguments=params.arguments or {},
            progress=_SessionProgress(ctx.session),
            answerer=_SessionAnswerer(ctx.session, ctx.request_id) if can_ask else None,
            answers_later=modern,
            resume=_resumed(params) if modern and params.request_state is not None else None,
        )
        try:
            answer = await self._call().execute(call)
        except PublishedNotFound as error:
            raise MCPError(types.INVALID_PARAMS, error.detail) from None
        if answer.questions and modern:
            return _input_required(answer)
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
        """The organization's sources, of every thread and agent, oldest first."""
        caller = caller_of(ctx)
        try:
            page = await self._list_sources().execute(
                caller, PageRequest(limit=SOURCE_PAGE, cursor=params.cursor if params else None)
            )
        except InvalidCursor as error:
            raise MCPError(types.INVALID_PARAMS, error.detail) from None
        return types.ListResourcesResult(resources=[_resource(s) for s in page.items], next_cursor=page.next_cursor)

    async def list_resource_templates(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        caller_of(ctx)
        templates = [
            types.ResourceTemplate(
                uri_template=SOURCE_URI_PREFIX + "{source_id}",
                name="source",
                description="A source of one of the organization's threads or agents, by its id: its text, a table "
                "as CSV, or its bytes",
            ),
            types.ResourceTemplate(
                uri_template="threadline://threads/{thread_id}/sources",
                name="thread-sources",
                description="The sources of one thread: each one's URI, name, type and size, as JSON",
                mime_type="application/json",
            ),
            types.ResourceTemplate(
                uri_template="threadline://agents/{agent_id}/sources",
                name="agent-sources",
                description="The sources of one agent: each one's URI, name, type and size, as JSON",
                mime_type="application/json",
            ),
        ]
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def read_resource(self, ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        caller = caller_of(ctx)
        uri = str(params.uri)
        if owned := OWNED_SOURCES.match(uri):
            return await self._owned_sources(caller, uri, owned.group(1), owned.group(2))
        source_id = _source_id(uri)
        if source_id is None:
            raise _unknown_resource(uri)
        try:
            source = await self._get_source().execute(caller, source_id)
        except SourceNotFound:
            raise _unknown_resource(uri) from None
        return types.ReadResourceResult(contents=[_contents(uri, source)])

    async def _owned_sources(self, caller: Caller, uri: str, owner: str, raw_id: str) -> types.ReadResourceResult:
        """A thread's or an agent's sources (another organization's thread or agent is unknown)."""
        try:
            owner_id = UUID(raw_id)
        except ValueError:
            raise _unknown_resource(uri) from None
        of = {"thread_id": ThreadId(owner_id)} if owner == "threads" else {"agent_id": AgentId(owner_id)}
        found: list[SourceSummary] = []
        cursor: str | None = None
        try:
            while len(found) < OWNED_SOURCES_MAX:
                page = await self._list_sources().execute(caller, PageRequest(limit=SOURCE_PAGE, cursor=cursor), **of)
                found.extend(page.items)
                if (cursor := page.next_cursor) is None:
                    break
        except NotFound:
            raise _unknown_resource(uri) from None
        listed = {
            "sources": [
                {
                    "uri": source_uri(s.id),
                    "name": s.name,
                    "mimeType": _mime_type(s.kind, s.mime_type),
                    "size": s.size,
                    "kind": s.kind.value,
                }
                for s in found[:OWNED_SOURCES_MAX]
            ],
            "truncated": cursor is not None,
        }
        text = json.dumps(listed, ensure_ascii=False)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
        )

    async def subscribe(self, ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
        """A handshake-era client is told (`notifications/resources/updated`) when the source is deleted or
        replaced; 2026-07-28 clients ask on their `subscriptions/listen` stream."""
        caller = caller_of(ctx)
        self._notifier.subscribe(caller.org_id, str(params.uri), ctx)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        caller = caller_of(ctx)
        self._notifier.unsubscribe(caller.org_id, str(params.uri), ctx)
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

    async def sources_changed(self, org_id: OrgId | None, source_ids: Sequence[SourceId] | None) -> None:
        """Tell an organization's clients (None: every organization's) that its sources changed: which ones
        (None: any), so that those subscribed to them are told they were updated."""
        await self._notifier.sources_changed(
            org_id, None if source_ids is None else [source_uri(s) for s in source_ids]
        )

    def close(self) -> None:
        self._notifier.close()
