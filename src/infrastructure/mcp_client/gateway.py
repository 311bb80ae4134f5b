"""The MCP gateway: pooled sessions, cached catalogs, typed errors."""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import HEADER_MISMATCH
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from application.errors import InvalidReference, McpConnectionFailed, McpError, McpProtocolError
from application.ports.mcp import (
    NO_HOOKS,
    McpAnswer,
    McpCallHooks,
    McpCatalog,
    McpInputRequired,
    McpPromptInfo,
    McpQuestion,
    McpResourceContent,
    McpResourceInfo,
    McpResourceTemplateInfo,
    McpServerInfo,
    McpTarget,
    McpToolInfo,
    McpToolResult,
)
from application.ports.oauth import McpAuthorizer
from domain.ids import IntegrationId
from domain.integrations import Transport
from domain.mcp_prompts import PromptResult
from infrastructure.mcp_client import convert
from infrastructure.mcp_client.catalog_cache import CatalogCache
from infrastructure.mcp_client.connection import McpConnection, OpenCall, open_call, opened
from infrastructure.mcp_client.errors import is_connection_lost, is_generic_http_error, is_session_gone
from infrastructure.mcp_client.oauth import auth_for
from infrastructure.mcp_client.operator_servers import OperatorServerRegistry
from infrastructure.mcp_client.pool import McpSessionPool
from infrastructure.outbound.guard import NetworkPolicy

logger = logging.getLogger(__name__)
T = TypeVar("T")
MAX_PAGES = 100
# Server caching hints are honoured up to this long.
MAX_HINTED_TTL = 3_600.0
ASKING_READ_TIMEOUT = 86_400.0
"""The SDK's bound on a call that may ask the user (the gateway bounds the server's own time itself)."""
STATE_ONLY_ROUNDS = 6
"""How many times a tool call is made again when the server answers it with state only (no question)."""
_CATALOG_KINDS = ("tools", "prompts", "resources", "resource_templates")
"""The kinds of a server's catalog, as they are cached (see `_catalog`), in McpCatalog's order."""


async def _all_pages(fetch: Callable[[str | None], Awaitable[Any]], items: str) -> tuple[list[Any], float | None]:
    """Every item of a paginated list, and the smallest TTL hint (seconds) among the pages."""
    collected: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    ttl: float | None = None
    for _ in range(MAX_PAGES):
        page = await fetch(cursor)
        collected.extend(getattr(page, items))
        hint = getattr(page, "ttl_ms", None)
        if hint is not None and "ttl_ms" in page.model_fields_set:
            ttl = hint / 1000 if ttl is None else min(ttl, hint / 1000)
        cursor = page.next_cursor
        if not cursor or cursor in seen:
            break
        seen.add(cursor)
    return collected, ttl


class SdkMcpGateway:
    def __init__(
        self,
        *,
        servers: OperatorServerRegistry,
        outbound: NetworkPolicy,
        catalog_ttl_seconds: float = 300,
        max_sessions: int = 64,
        idle_seconds: float = 300,
        authorizers: Callable[[McpTarget], McpAuthorizer] | None = None,
    ) -> None:
        self._servers = servers
        self._outbound = outbound
        self._ttl = catalog_ttl_seconds
        self._cache = CatalogCache()
        self._pool = McpSessionPool(
            max_sessions=max_sessions,
            idle_seconds=idle_seconds,
            on_change=self._cache.invalidate,
            outbound=outbound,
            auth_for=(lambda target: auth_for(target, authorizers)) if authorizers else (lambda _target: None),
        )

    # -- sessions ------------------------------------------------------------------------------

    def _stdio(self, target: McpTarget) -> StdioServerParameters | None:
        if target.transport is not Transport.STDIO:
            return None
        parameters = self._servers.parameters(target.server or "")
        if parameters is None:
            raise InvalidReference(f"no operator-defined MCP server named {target.server!r}")
        return parameters

    async def _check(self, target: McpTarget) -> StdioServerParameters | None:
        if target.url is not None and target.transport is not Transport.STDIO:
            await self._outbound.check_url(target.url)
        return self._stdio(target)

    async def _run(
        self,
        target: McpTarget,
        operation: Callable[[Client], Awaitable[T]],
        *,
        doing: str,
        idempotent: bool,
        bounded: bool = True,
    ) -> T:
        try:
            return await self._attempt(target, operation, doing=doing, idempotent=idempotent, bounded=bounded)
        except McpConnectionFailed:
            # The server is unreachable: its cached catalogs must not offer its tools any longer. The next
            # listing connects again, and fails (the integration is skipped, with a warning) until it is back.
            self._cache.invalidate(target.integration_id)
            logger.info(
                "MCP server unreachable; its catalogs are dropped until it reconnects",
                extra={"integration_id": str(target.integration_id)},
            )
            raise

    async def _attempt(
        self,
        target: McpTarget,
        operation: Callable[[Client], Awaitable[T]],
        *,
        doing: str,
        idempotent: bool,
        bounded: bool = True,
    ) -> T:
        stdio = await self._check(target)
        connection = await self._pool.session(target, stdio)
        try:
            return await connection.request(operation, doing=doing, bounded=bounded)
        except McpError as error:
            cause = error.__cause__
            refused = connection.session_rejected and is_generic_http_error(cause)
            if cause is None or not (refused or is_connection_lost(cause)):
                raise
            await self._pool.drop(target.integration_id)
            # A tool call is only repeated when the server cannot have run it (it refused our session).
            if not (idempotent or refused or is_session_gone(cause)):
                raise
            logger.info("MCP session lost; reconnecting", extra={"integration_id": str(target.integration_id)})
            connection = await self._pool.session(target, stdio)
            return await connection.request(operation, doing=doing, bounded=bounded)

    async def _catalog(
        self,
        target: McpTarget,
        kind: str,
        fetch: Callable[[Client], Awaitable[tuple[list[Any], float | None]]],
    ) -> list[Any]:
        cached = self._cache.get(target.integration_id, kind, target.version)
        if cached is not None:
            return list(cached)
        generation = self._cache.generation(target.integration_id, kind)
        items, hinted = await self._run(target, fetch, doing=f"listing {kind.replace('_', ' ')}", idempotent=True)
        ttl = self._ttl if hinted is None else min(hinted, MAX_HINTED_TTL)
        self._cache.put(target.integration_id, kind, target.version, tuple(items), ttl, generation)
        return items

    # -- the port ------------------------------------------------------------------------------

    async def catalog(self, target: McpTarget) -> McpCatalog:
        known = [self._cache.get(target.integration_id, kind, target.version) for kind in _CATALOG_KINDS]
        if all(found is not None for found in known):  # no task, and no turn of the event loop, to wait for
            tools, prompts, resources, templates = (list(found or ()) for found in known)
        else:
            tools, prompts, resources, templates = await asyncio.gather(
                self.list_tools(target),
                self.list_prompts(target),
                self.list_resources(target),
                self.list_resource_templates(target),
            )
        return McpCatalog(tools=tools, prompts=prompts, resources=resources, templates=templates)

    async def list_tools(self, target: McpTarget) -> Sequence[McpToolInfo]:
        async def fetch(client: Client) -> tuple[list[Any], float | None]:
            tools, ttl = await _all_pages(lambda c: client.list_tools(cursor=c), "tools")
            return [convert.tool_info(t) for t in tools], ttl

        return await self._catalog(target, "tools", fetch)

    async def list_resources(self, target: McpTarget) -> Sequence[McpResourceInfo]:
        async def fetch(client: Client) -> tuple[list[Any], float | None]:
            if client.server_capabilities.resources is None:
                return [], None
            found, ttl = await _all_pages(lambda c: client.list_resources(cursor=c), "resources")
            return [convert.resource_info(r) for r in found], ttl

        return await self._catalog(target, "resources", fetch)

    async def list_resource_templates(self, target: McpTarget) -> Sequence[McpResourceTemplateInfo]:
        async def fetch(client: Client) -> tuple[list[Any], float | None]:
            if client.server_capabilities.resources is None:
                return [], None
            found, ttl = await _all_pages(lambda c: client.list_resource_templates(cursor=c), "resource_templates")
            return [convert.template_info(t) for t in found], ttl

        return await self._catalog(target, "resource_templates", fetch)

    async def list_prompts(self, target: McpTarget) -> Sequence[McpPromptInfo]:
        async def fetch(client: Client) -> tuple[list[Any], float | None]:
            if client.server_capabilities.prompts is None:
                return [], None
            found, ttl = await _all_pages(lambda c: client.list_prompts(cursor=c), "prompts")
            return [convert.prompt_info(p) for p in found], ttl

        return await self._catalog(target, "prompts", fetch)

    async def call_tool(
        self, target: McpTarget, name: str, arguments: Mapping[str, Any], hooks: McpCallHooks = NO_HOOKS
    ) -> McpToolResult | McpInputRequired:
        on_progress, on_question, on_log = hooks.on_progress, hooks.on_question, hooks.on_log
        answers, request_state = hooks.answers, hooks.request_state

        async def progressed(progress: float, total: float | None, message: str | None) -> None:
            if on_progress is None:
                return
            try:
                await on_progress(progress, total, message)
            except Exception:  # telling followers must never fail the call
                logger.debug("a tool call's progress could not be told", exc_info=True)

        async def call(client: Client) -> McpToolResult | McpInputRequired:
            if on_question is None:
                with open_call(client.session, OpenCall(log=on_log)):
                    return await exchange(client, target.timeout_seconds)
            loop = asyncio.get_running_loop()
            async with asyncio.timeout(target.timeout_seconds) as limit:

                async def asked(question: McpQuestion) -> McpAnswer:
                    with contextlib.suppress(RuntimeError):  # the call may have ended meanwhile
                        limit.reschedule(None)  # the time the user takes is not the server's
                    try:
                        return await on_question(question)
                    finally:
                        with contextlib.suppress(RuntimeError):
                            limit.reschedule(loop.time() + target.timeout_seconds)

                with open_call(client.session, OpenCall(ask=asked, log=on_log)):
                    return await exchange(client, ASKING_READ_TIMEOUT)

        async def exchange(client: Client, read_timeout: float) -> McpToolResult | McpInputRequired:
            responses: types.InputResponses | None = None
            if answers:
                responses = {
                    key: types.ElicitResult(action=answer.action, content=answer.content)
                    for key, answer in answers.items()
                }
            state = request_state

            modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
            # Logging is deprecated in 2026-07-28 (SEP-2577), where a request opts in to the log messages of its own
            # stream: a call whose logs are heard asks for them from info up.
            opt_in = cast(types.RequestParamsMeta, {types.LOG_LEVEL_META_KEY: "info"})
            meta = opt_in if on_log is not None and modern else None

            async def send() -> Any:
                return await client.session.call_tool(
                    name,
                    dict(arguments),
                    read_timeout_seconds=read_timeout,
                    progress_callback=progressed if on_progress is not None else None,
                    input_responses=responses,
                    request_state=state,
                    meta=meta,
                    allow_input_required=True,
                )

            for again in range(STATE_ONLY_ROUNDS):
                try:
                    result = await send()
                except MCPError as mismatch:
                    if mismatch.code != HEADER_MISMATCH or not modern:
                        raise
                    # The spec's recovery (as Client.call_tool does it): this session has not listed the tool, or
                    # its schema changed, so its arguments were not mirrored into headers. List, send once more.
                    await _all_pages(lambda c: client.list_tools(cursor=c), "tools")
                    result = await send()
                if not isinstance(result, types.InputRequiredResult):
                    return convert.tool_result(result)
                needed = convert.input_required(result)
                if needed.questions:
                    return needed
                # Only state: the server asks to be called again with it, shortly.
                responses, state = None, result.request_state
                await asyncio.sleep(0.05 * 2**again)
            raise McpProtocolError(f"the MCP server kept asking to be called again for tool {name!r}")

        return await self._run(
            target, call, doing=f"calling tool {name!r}", idempotent=False, bounded=on_question is None
        )

    async def read_resource(self, target: McpTarget, uri: str) -> Sequence[McpResourceContent]:
        async def read(client: Client) -> list[McpResourceContent]:
            return convert.resource_contents(await client.read_resource(uri, cache_mode="bypass"))

        return await self._run(target, read, doing=f"reading resource {uri!r}", idempotent=True)

    async def get_prompt(self, target: McpTarget, name: str, arguments: Mapping[str, str]) -> PromptResult:
        async def get(client: Client) -> PromptResult:
            return convert.prompt_result(await client.get_prompt(name, dict(arguments)))

        return await self._run(target, get, doing=f"getting prompt {name!r}", idempotent=True)

    async def probe(self, target: McpTarget) -> McpServerInfo:
        stdio = await self._check(target)
        connection: McpConnection = self._pool.new_connection(target, stdio)
        async with opened(connection):

            async def describe(client: Client) -> McpServerInfo:
                capabilities = client.server_capabilities
                tools: list[Any] = []
                if capabilities.tools is not None:
                    tools, _ = await _all_pages(lambda c: client.list_tools(cursor=c), "tools")
                resources: list[Any] = []
                templates: list[Any] = []
                prompts: list[Any] = []
                if capabilities.resources is not None:
                    resources, _ = await _all_pages(lambda c: client.list_resources(cursor=c), "resources")
                    templates, _ = await _all_pages(
                        lambda c: client.list_resource_templates(cursor=c), "resource_templates"
                    )
                if capabilities.prompts is not None:
                    prompts, _ = await _all_pages(lambda c: client.list_prompts(cursor=c), "prompts")
                info = client.server_info
                return McpServerInfo(
                    name=info.name if info else None,
                    version=info.version if info else None,
                    protocol_version=client.protocol_version,
                    capabilities=capabilities.model_dump(mode="json", exclude_none=True, by_alias=True),
                    tools=len(tools),
                    resources=len(resources),
                    resource_templates=len(templates),
                    prompts=len(prompts),
                )

            return await connection.request(describe, doing="testing the connection")

    async def forget(self, integration_id: IntegrationId) -> None:
        self._cache.invalidate(integration_id)
        await self._pool.drop(integration_id)

    async def close(self) -> None:
        await self._pool.close()
