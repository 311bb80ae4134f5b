"""An MCP server built with the `mcp` SDK, served over Streamable HTTP on 127.0.0.1 in this process.

It has small pages (so clients must follow cursors), text, CSV and blob resources, prompts with
arguments, a tool that adds a tool and announces the change, a tool that never answers, one that reports its
progress, with `asks=True` one that asks the user a question first (elicitation), and an optional bearer token
it insists on. With `announces_changes=False` it serves no change notifications
(no `subscriptions/listen`): a client learns that it went away only when a request fails.
"""

import asyncio
import base64
import collections
import contextlib
import json
import warnings
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPDeprecationWarning
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.fakes.loopback import LoopbackServer

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
RESOURCES = {
    "memo://notes": ("Notes", "text/plain", "Remember the milk.\nCall Ada on Tuesday."),
    "memo://people.csv": ("People", "text/csv", "name,city\nAda,London\nGrace,Arlington\n"),
    "memo://logo.png": ("Logo", "image/png", PNG),
}
PROMPTS = {
    "greet": ("Greets someone", [types.PromptArgument(name="name", description="Who", required=True)]),
    "plan-trip": (
        "Plans a trip",
        [
            types.PromptArgument(name="city", description="Destination", required=True),
            types.PromptArgument(name="days", description="How long", required=False),
        ],
    ),
    "welcome": ("Says welcome", []),
}


RESTAURANT = {"restaurant": {"type": "string"}}
PARTY = {
    "type": "object",
    "properties": {
        "guests": {"type": "integer", "minimum": 1, "maximum": 12, "description": "How many guests"},
        "name": {"type": "string", "minLength": 1, "description": "The reservation's name"},
    },
    "required": ["guests", "name"],
}


def _page(items: list[Any], cursor: str | None, size: int) -> tuple[list[Any], str | None]:
    start = int(cursor or 0)
    end = start + size
    return items[start:end], (str(end) if end < len(items) else None)


def _tool(name: str, description: str, properties: dict[str, Any] | None = None) -> types.Tool:
    schema = {"type": "object", "properties": properties or {}}
    return types.Tool(name=name, description=description, input_schema=schema)


class FakeMcpServer:
    """`async with FakeMcpServer(token="s3cret") as server:` then connect to `server.url`."""

    def __init__(
        self,
        *,
        page_size: int = 2,
        token: str | None = None,
        list_ttl_ms: int = 0,
        announces_changes: bool = True,
        asks: bool = False,
    ) -> None:
        self.page_size = page_size
        self.announces_changes = announces_changes
        self.token = token
        self.list_ttl_ms = list_ttl_ms
        self.methods: collections.Counter[str] = collections.Counter()
        self.tools = [
            _tool("echo", "Echoes a message", {"message": {"type": "string"}}),
            _tool("add", "Adds two numbers", {"a": {"type": "number"}, "b": {"type": "number"}}),
            _tool("fail", "Always fails"),
            _tool("picture", "Returns an image"),
            _tool("hang", "Never answers"),
            _tool("grow", "Adds a tool named `extra` and announces it"),
            _tool("stats", "Returns structured content only"),
            _tool(
                "steps",
                "Works in three steps (or `count`), logging the first three and reporting its progress at each",
                {"count": {"type": "integer"}},
            ),
        ]
        if asks:
            self.tools.append(_tool("reserve", "Reserves a table, asking the user how many guests", RESTAURANT))
        self.answers: list[dict[str, Any]] = []
        """The input responses each call of `reserve` came with."""
        self.calls: list[str] = []
        self.list_tools_requests = 0
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        self.listening = 0
        """Clients listening for changes now: one per open session of a client that listens."""
        self._listening_waiters: list[tuple[int, asyncio.Event]] = []
        self.url = ""

    async def _counted_listen(
        self, ctx: Any, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        self._count_listening(+1)
        try:
            return await self._listen(ctx, params)
        finally:
            self._count_listening(-1)

    def _count_listening(self, change: int) -> None:
        self.listening += change
        for count, reached in self._listening_waiters:
            if self.listening == count:
                reached.set()

    async def wait_listening(self, count: int) -> None:
        """Until exactly `count` clients listen (sessions closed by a client end their stream soon after)."""
        reached = asyncio.Event()
        if self.listening == count:
            return
        self._listening_waiters.append((count, reached))
        try:
            await reached.wait()
        finally:
            self._listening_waiters.remove((count, reached))

    def _mcp(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            self.list_tools_requests += 1
            tools, cursor = _page(self.tools, params.cursor if params else None, self.page_size)
            return types.ListToolsResult(tools=tools, next_cursor=cursor, ttl_ms=self.list_ttl_ms)

        async def call_tool(
            ctx: Any, params: types.CallToolRequestParams
        ) -> types.CallToolResult | types.InputRequiredResult:
            args = params.arguments or {}
            self.calls.append(params.name)
            text = types.TextContent
            match params.name:
                case "echo":
                    return types.CallToolResult(content=[text(type="text", text=f"Echo: {args.get('message')}")])
                case "add":
                    total = args.get("a", 0) + args.get("b", 0)
                    return types.CallToolResult(content=[text(type="text", text=str(total))])
                case "fail":
                    return types.CallToolResult(content=[text(type="text", text="it broke")], is_error=True)
                case "picture":
                    image = types.ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png")
                    return types.CallToolResult(content=[text(type="text", text="a dot"), image])
                case "stats":
                    return types.CallToolResult(content=[], structured_content={"count": 3, "ok": True})
                case "hang":
                    await asyncio.Event().wait()
                case "grow":
                    if not any(t.name == "extra" for t in self.tools):
                        self.tools.append(_tool("extra", "Appeared later"))
                    await self.bus.publish(ToolsListChanged())
                    with contextlib.suppress(Exception):
                        await ctx.session.send_tool_list_changed()
                    return types.CallToolResult(content=[text(type="text", text="grown")])
                case "steps":
                    count = int(args.get("count", 3))
                    for step in range(1, count + 1):
                        if step <= 3:
                            with warnings.catch_warnings():  # logging is deprecated in 2026-07-28; servers still log
                                warnings.simplefilter("ignore", MCPDeprecationWarning)
                                await ctx.session.send_log_message(
                                    "info", f"working on step {step}", logger="steps", related_request_id=ctx.request_id
                                )
                        await ctx.session.report_progress(step, count, f"step {step} of {count}")
                    done = "all three steps done" if count == 3 else f"all {count} steps done"
                    return types.CallToolResult(content=[text(type="text", text=done)])
                case "reserve":
                    return self._reserve(args, params)
                case "extra":
                    return types.CallToolResult(content=[text(type="text", text="extra!")])
            return types.CallToolResult(content=[text(type="text", text=f"Unknown tool {params.name}")], is_error=True)

        async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
            items = [types.Resource(uri=uri, name=name, mime_type=mime) for uri, (name, mime, _) in RESOURCES.items()]
            page, cursor = _page(items, params.cursor if params else None, self.page_size)
            return types.ListResourcesResult(resources=page, next_cursor=cursor, ttl_ms=self.list_ttl_ms)

        async def list_templates(
            ctx: Any, params: types.PaginatedRequestParams | None
        ) -> types.ListResourceTemplatesResult:
            template = types.ResourceTemplate(uri_template="memo://items/{id}", name="Item", mime_type="text/plain")
            return types.ListResourceTemplatesResult(resource_templates=[template], ttl_ms=self.list_ttl_ms)

        async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
            uri = str(params.uri)
            if uri.startswith("memo://items/"):
                item = uri.rsplit("/", 1)[-1]
                return types.ReadResourceResult(
                    contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=f"Item {item}")]
                )
            if uri not in RESOURCES:
                from mcp.shared.exceptions import MCPError

                raise MCPError(-32002, f"Resource not found: {uri}")
            _, mime, body = RESOURCES[uri]
            if isinstance(body, bytes):
                blob = types.BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(body).decode())
                return types.ReadResourceResult(contents=[blob])
            return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=body)])

        async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
            items = [types.Prompt(name=n, description=d, arguments=a) for n, (d, a) in PROMPTS.items()]
            page, cursor = _page(items, params.cursor if params else None, self.page_size)
            return types.ListPromptsResult(prompts=page, next_cursor=cursor, ttl_ms=self.list_ttl_ms)

        async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
            args = params.arguments or {}
            text = types.TextContent
            if params.name == "greet":
                messages = [
                    types.PromptMessage(role="user", content=text(type="text", text=f"Say hello to {args['name']}.")),
                ]
            elif params.name == "plan-trip":
                days = args.get("days", "3")
                messages = [
                    types.PromptMessage(
                        role="user", content=text(type="text", text=f"Plan {days} days in {args['city']}.")
                    ),
                    types.PromptMessage(
                        role="assistant",
                        content=types.ImageContent(
                            type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"
                        ),
                    ),
                ]
            else:
                messages = [types.PromptMessage(role="user", content=text(type="text", text="Welcome!"))]
            return types.GetPromptResult(description=PROMPTS[params.name][0], messages=messages)

        return Server(
            "fake-mcp",
            version="1.2.3",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read_resource,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_subscriptions_listen=self._counted_listen if self.announces_changes else None,
        )

    def _reserve(
        self, args: dict[str, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Asks how many guests (2026-07-28: an InputRequiredResult whose state names the restaurant), then
        reserves with the answer; the state is plain JSON, so the call may be carried on by any client later."""
        restaurant = str(args.get("restaurant", ""))
        responses = params.input_responses or {}
        self.answers.append({k: v.model_dump(exclude_none=True) for k, v in responses.items()})
        answer = responses.get("party")
        if answer is None:
            question = types.ElicitRequest(
                params=types.ElicitRequestFormParams(
                    message=f"How many guests at {restaurant}?", requested_schema=PARTY
                )
            )
            state = json.dumps({"restaurant": restaurant})
            return types.InputRequiredResult(input_requests={"party": question}, request_state=state)
        assert params.request_state is not None and json.loads(params.request_state) == {"restaurant": restaurant}
        text = types.TextContent
        if not isinstance(answer, types.ElicitResult) or answer.action != "accept" or answer.content is None:
            action = getattr(answer, "action", "no answer")
            return types.CallToolResult(content=[text(type="text", text=f"No table reserved: the user chose {action}")])
        content = answer.content
        return types.CallToolResult(
            content=[text(type="text", text=f"Table for {content['guests']} at {restaurant}, name {content['name']}")]
        )

    def _guarded(self, app: ASGIApp) -> ASGIApp:
        token = self.token

        async def guard(scope: Scope, receive: Receive, send: Send) -> None:
            if token is not None and scope["type"] == "http":
                headers = dict(scope.get("headers") or [])
                if headers.get(b"authorization") != f"Bearer {token}".encode():
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": b"unauthorized"})
                    return

            if scope["type"] != "http":
                await app(scope, receive, send)
                return

            async def counting_receive() -> Message:
                message = await receive()
                if message["type"] == "http.request" and message.get("body"):
                    with contextlib.suppress(ValueError, AttributeError):
                        self.methods[json.loads(message["body"]).get("method", "")] += 1
                return message

            await app(scope, counting_receive, send)

        return guard

    @property
    def port(self) -> int:
        return self._loopback.port

    async def __aenter__(self) -> "FakeMcpServer":
        self._loopback = LoopbackServer(self._guarded(self._mcp().streamable_http_app()))
        await self._loopback.__aenter__()
        self.url = f"{self._loopback.base_url}/mcp"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._listen.close()  # ends clients' listen streams, so the server can stop without waiting for them
        await self._loopback.__aexit__(None, None, None)


@contextlib.asynccontextmanager
async def fake_mcp_server(**options: Any) -> AsyncIterator[FakeMcpServer]:
    async with FakeMcpServer(**options) as server:
        yield server
