"""Fakes of the application's ports other than persistence, for unit tests of use cases."""

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from application.errors import ModelError, ToolFailure, UrlNotAllowed
from application.ports.execution import RunEventBus, RunSubscription
from application.ports.llm import ModelRequest, ModelResponse, ModelToolCall, TextListener
from application.ports.mcp import (
    NO_HOOKS,
    McpCallHooks,
    McpCatalog,
    McpInputRequired,
    McpPromptInfo,
    McpResourceContent,
    McpResourceInfo,
    McpResourceTemplateInfo,
    McpServerInfo,
    McpTarget,
    McpToolInfo,
    McpToolResult,
)
from application.ports.native_tools import CommandSpec, ProcessOutput, SearchHit, WebPage
from application.ports.security import MintedKey
from application.ports.template_files import FileTemplate
from application.ports.tracing import Level
from domain.ids import IntegrationId, OrgId, RunId
from domain.mcp_prompts import PromptResult
from domain.run_events import RunEvent
from domain.usage import Usage

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


class FixedClock:
    """Time stands still unless a test moves it."""

    def __init__(self, now: datetime = NOW) -> None:
        self.current = now

    def now(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


class SequentialIds:
    """Ids that increase, as the port promises: 00000000-0000-7000-8000-000000000001, ...002, ..."""

    def __init__(self) -> None:
        self._next = itertools.count(1)

    def new(self) -> UUID:
        return UUID(int=(0x7 << 76) | (0b10 << 62) | next(self._next))


# -- the language model ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Hold:
    """A model call that waits until the test releases it (to cancel a run while it thinks)."""

    received: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


Reply = ModelResponse | ModelError | Hold


def answer(text: str, *, tokens: int = 3) -> ModelResponse:
    return ModelResponse(text=text, usage=Usage(input_tokens=tokens, output_tokens=tokens), model="scripted-1")


def calls(*tool_calls: ModelToolCall, text: str = "") -> ModelResponse:
    return ModelResponse(text=text, tool_calls=tool_calls, usage=Usage(input_tokens=2, output_tokens=1))


def call(name: str, arguments: Mapping[str, Any] | None = None, *, id: str | None = None) -> ModelToolCall:
    return ModelToolCall(id=id or f"call_{name}", name=name, arguments=dict(arguments or {}))


class ScriptedModel:
    """Answers each call with the next scripted reply; streams the text of answers in two deltas.
    `before` is awaited first with each request (to look at what is stored while the model is called)."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[ModelRequest] = []
        self.before: Callable[[ModelRequest], Awaitable[None]] | None = None

    def then(self, *replies: Reply) -> "ScriptedModel":
        self.replies.extend(replies)
        return self

    async def complete(self, request: ModelRequest, on_text: TextListener | None = None) -> ModelResponse:
        self.requests.append(request)
        if self.before is not None:
            await self.before(request)
        if not self.replies:
            raise AssertionError("the model was called more often than the test scripted")
        reply = self.replies.pop(0)
        if isinstance(reply, Hold):
            reply.received.set()
            await reply.release.wait()
            reply = self.replies.pop(0)
        if isinstance(reply, ModelError):
            raise reply
        assert isinstance(reply, ModelResponse)
        if on_text is not None and reply.text:
            half = len(reply.text) // 2
            for delta in (reply.text[:half], reply.text[half:]):
                if delta:
                    await on_text(delta)
        return reply


# -- tracing --------------------------------------------------------------------------------------


@dataclass
class RecordedSpan:
    name: str
    input: Any
    metadata: dict[str, Any]
    ended: dict[str, Any] | None = None

    def end(
        self,
        *,
        output: Any = None,
        level: Level = Level.DEFAULT,
        status_message: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self.ended = {"output": output, "level": level, "status_message": status_message, "metadata": metadata}

    @property
    def level(self) -> Level:
        return Level.DEFAULT if self.ended is None else self.ended["level"]


@dataclass
class RecordedGeneration:
    name: str
    model: str
    input: Any
    metadata: dict[str, Any] = field(default_factory=dict)
    ended: dict[str, Any] | None = None

    def end(
        self,
        *,
        output: Any = None,
        usage: Usage | None = None,
        model: str | None = None,
        level: Level = Level.DEFAULT,
        status_message: str | None = None,
    ) -> None:
        self.ended = {
            "output": output,
            "usage": usage,
            "model": model,
            "level": level,
            "status_message": status_message,
        }


class RecordingTrace:
    def __init__(self, run_id: str = "", metadata: Mapping[str, Any] | None = None) -> None:
        self.run_id = run_id
        self.metadata = dict(metadata or {})
        self.spans: list[RecordedSpan] = []
        self.generations: list[RecordedGeneration] = []
        self.ended: dict[str, Any] | None = None

    @property
    def trace_id(self) -> str | None:
        return f"trace-{self.run_id}"

    def span(self, name: str, *, input: Any = None, metadata: Mapping[str, Any] | None = None) -> RecordedSpan:
        span = RecordedSpan(name=name, input=input, metadata=dict(metadata or {}))
        self.spans.append(span)
        return span

    def generation(
        self,
        name: str,
        *,
        model: str,
        model_parameters: Mapping[str, Any],
        input: Any,
        metadata: Mapping[str, Any] | None = None,
    ) -> RecordedGeneration:
        generation = RecordedGeneration(name=name, model=model, input=input, metadata=dict(metadata or {}))
        self.generations.append(generation)
        return generation

    def end(self, *, output: Any = None, level: Level = Level.DEFAULT, status_message: str | None = None) -> None:
        self.ended = {"output": output, "level": level, "status_message": status_message}


class RecordingTracer:
    def __init__(self) -> None:
        self.traces: list[RecordingTrace] = []

    def start_run(
        self,
        *,
        name: str,
        run_id: str,
        thread_id: str,
        org_id: str,
        agent_id: str | None,
        input: Any = None,
        metadata: Mapping[str, Any] | None = None,
        trace_id: str | None = None,
    ) -> RecordingTrace:
        trace = RecordingTrace(run_id, metadata)
        self.traces.append(trace)
        return trace

    async def flush(self) -> None:
        pass

    def trace_url(self, trace_id: str) -> str | None:
        return f"https://traces.example/trace/{trace_id}"

    def of(self, run_id: RunId) -> RecordingTrace:
        return next(t for t in self.traces if t.run_id == str(run_id))


# -- run execution --------------------------------------------------------------------------------


@dataclass
class Subscription:
    backlog: list[RunEvent]
    queue: asyncio.Queue[RunEvent] = field(default_factory=asyncio.Queue)

    async def next(self) -> RunEvent:
        return await self.queue.get()

    def received(self) -> list[RunEvent]:
        taken = []
        while not self.queue.empty():
            taken.append(self.queue.get_nowait())
        return taken


class RecordingBus:
    """Keeps every published event; followers get what is published after they subscribe."""

    def __init__(self) -> None:
        self.published: list[RunEvent] = []
        self._followers: list[tuple[RunId, Subscription]] = []

    async def publish(self, event: RunEvent) -> None:
        self.published.append(event)
        for run_id, follower in self._followers:
            if run_id == event.run_id:
                follower.queue.put_nowait(event)

    @contextlib.asynccontextmanager
    async def subscribe(self, run_id: RunId) -> AsyncIterator[Subscription]:
        follower = Subscription(backlog=[e for e in self.published if e.run_id == run_id])
        self._followers.append((run_id, follower))
        try:
            yield follower
        finally:
            self._followers.remove((run_id, follower))

    async def sent(self) -> None:
        pass  # one process: delivered as published

    async def received_all(self) -> None:
        pass

    def types(self, run_id: RunId | None = None) -> list[str]:
        return [e.type.value for e in self.published if run_id is None or e.run_id == run_id]


class AfterSubscribing:
    """Another bus, on which `meanwhile` happens right after a follower subscribes, before it reads storage (the
    run goes on, an event arrives...)."""

    def __init__(self, bus: RunEventBus, meanwhile: Callable[[], Awaitable[object]]) -> None:
        self._bus, self._meanwhile = bus, meanwhile

    async def publish(self, event: RunEvent) -> None:
        await self._bus.publish(event)

    async def sent(self) -> None:
        await self._bus.sent()

    async def received_all(self) -> None:
        await self._bus.received_all()

    @contextlib.asynccontextmanager
    async def subscribe(self, run_id: RunId) -> AsyncIterator[RunSubscription]:
        async with self._bus.subscribe(run_id) as subscription:
            await self._meanwhile()
            yield subscription


class RecordingSlot:
    def __init__(self, executor: "RecordingExecutor") -> None:
        self._executor = executor

    def start(self, run_id: RunId, began: object) -> None:
        self._executor.started[run_id] = began

    def release(self) -> None:
        self._executor.free_slots += 1
        self._executor.released += 1


class RecordingExecutor:
    """Remembers what it was asked to execute; executes nothing itself (tests call ExecuteRun). A test that
    executes a run in a task hands it over in `tasks`, so that cancelling the run cancels that task. With
    `free_slots`, that many runs are started as they are created (what they began with is in `started`)."""

    def __init__(self) -> None:
        self.submitted: list[tuple[OrgId, RunId]] = []
        self.cancelled: list[RunId] = []
        self.tasks: dict[RunId, asyncio.Task[Any]] = {}
        self.free_slots = 0
        self.released = 0
        self.started: dict[RunId, object] = {}

    async def submit(self, org_id: OrgId, run_id: RunId) -> None:
        self.submitted.append((org_id, run_id))

    async def reserve(self, org_id: OrgId) -> RecordingSlot | None:
        if not self.free_slots:
            return None  # the run is submitted queued, for the test to execute
        self.free_slots -= 1
        return RecordingSlot(self)

    async def cancel(self, run_id: RunId) -> bool:
        self.cancelled.append(run_id)
        task = self.tasks.get(run_id)
        if task is None or task.done():
            return False
        task.cancel()
        await asyncio.wait({task})
        return True


# -- MCP ------------------------------------------------------------------------------------------


class FakeGateway:
    """An MCP server's catalogs and answers, without a server; `failure` is raised by every call, and
    `failing` raises its error only from the operations it names (e.g. "list_resources")."""

    def __init__(
        self,
        *,
        tools: Sequence[McpToolInfo] = (),
        prompts: Sequence[McpPromptInfo] = (),
        resources: Sequence[McpResourceInfo] = (),
        templates: Sequence[McpResourceTemplateInfo] = (),
        prompt: PromptResult | None = None,
        contents: Sequence[McpResourceContent] = (),
        result: McpToolResult | None = None,
        server: McpServerInfo | None = None,
        failure: Exception | None = None,
        failing: Mapping[str, Exception] | None = None,
    ) -> None:
        self.tools, self.prompts, self.resources, self.templates = list(tools), list(prompts), resources, templates
        self.prompt, self.contents, self.result, self.server = prompt, contents, result, server
        self.failure = failure
        self.failing = dict(failing or {})
        self.prompt_requests: list[tuple[str, dict[str, str]]] = []
        self.tool_calls: list[tuple[str, dict[str, Any]]] = []
        self.reads: list[str] = []
        self.forgotten: list[IntegrationId] = []
        self.targets: list[McpTarget] = []

    def _use(self, target: McpTarget, operation: str) -> None:
        self.targets.append(target)
        if self.failure is not None:
            raise self.failure
        if operation in self.failing:
            raise self.failing[operation]

    async def probe(self, target: McpTarget) -> McpServerInfo:
        self._use(target, "probe")
        assert self.server is not None
        return self.server

    async def list_tools(self, target: McpTarget) -> Sequence[McpToolInfo]:
        self._use(target, "list_tools")
        return self.tools

    async def list_resources(self, target: McpTarget) -> Sequence[McpResourceInfo]:
        self._use(target, "list_resources")
        return self.resources

    async def list_resource_templates(self, target: McpTarget) -> Sequence[McpResourceTemplateInfo]:
        self._use(target, "list_resource_templates")
        return self.templates

    async def list_prompts(self, target: McpTarget) -> Sequence[McpPromptInfo]:
        self._use(target, "list_prompts")
        return self.prompts

    async def catalog(self, target: McpTarget) -> McpCatalog:
        return McpCatalog(
            tools=await self.list_tools(target),
            prompts=await self.list_prompts(target),
            resources=await self.list_resources(target),
            templates=await self.list_resource_templates(target),
        )

    async def call_tool(
        self, target: McpTarget, name: str, arguments: Mapping[str, Any], hooks: McpCallHooks = NO_HOOKS
    ) -> McpToolResult | McpInputRequired:
        self._use(target, "call_tool")
        self.tool_calls.append((name, dict(arguments)))
        assert self.result is not None
        return self.result

    async def read_resource(self, target: McpTarget, uri: str) -> Sequence[McpResourceContent]:
        self._use(target, "read_resource")
        self.reads.append(uri)
        return self.contents

    async def get_prompt(self, target: McpTarget, name: str, arguments: Mapping[str, str]) -> PromptResult:
        self._use(target, "get_prompt")
        self.prompt_requests.append((name, dict(arguments)))
        assert self.prompt is not None
        return self.prompt

    async def forget(self, integration_id: IntegrationId) -> None:
        self.forgotten.append(integration_id)


class PlainSecrets:
    """A secret box that seals by marking: `sealed:<plaintext>`."""

    def seal(self, plaintext: str) -> str:
        return f"sealed:{plaintext}"

    def open(self, ciphertext: str) -> str:
        return ciphertext.removeprefix("sealed:")

    def rotate(self, ciphertext: str) -> str:
        return f"sealed:{self.open(ciphertext)}"


class Outbound:
    """The outbound guard: refuses the hosts it was told to."""

    def __init__(self, *refused_hosts: str) -> None:
        self.refused = set(refused_hosts)
        self.checked: list[str] = []

    async def check_url(self, url: str) -> None:
        self.checked.append(url)
        if any(f"//{host}" in url for host in self.refused):
            raise UrlNotAllowed(f"{url} is not allowed")


class OperatorServers:
    def __init__(self, *names: str) -> None:
        self._names = sorted(names)

    def names(self) -> Sequence[str]:
        return self._names


# -- native tools, keys, template files -----------------------------------------------------------


class Commands:
    """The operator's commands; each run answers `output`. A name it does not define is a ToolFailure."""

    def __init__(self, *specs: CommandSpec, output: ProcessOutput | None = None) -> None:
        self.specs = list(specs)
        self.output = output or ProcessOutput(output="done", exit_code=0)
        self.runs: list[tuple[str, list[str]]] = []

    def commands(self) -> Sequence[CommandSpec]:
        return self.specs

    async def run(self, name: str, arguments: Sequence[str]) -> ProcessOutput:
        if not any(spec.name == name for spec in self.specs):
            raise ToolFailure(f"no command named {name!r}")
        self.runs.append((name, list(arguments)))
        return self.output


class Search:
    """A search provider that finds `hits` for any query, or fails with `failure`."""

    def __init__(self, *hits: SearchHit, available: bool = True, failure: ToolFailure | None = None) -> None:
        self.hits, self._available, self.failure = list(hits), available, failure
        self.queries: list[str] = []

    @property
    def available(self) -> bool:
        return self._available

    async def search(self, query: str, *, limit: int = 5) -> Sequence[SearchHit]:
        self.queries.append(query)
        if self.failure is not None:
            raise self.failure
        return self.hits[:limit]


class Sandbox:
    def __init__(self, *, available: bool = True, output: ProcessOutput | None = None) -> None:
        self._available = available
        self.output = output or ProcessOutput(output="42", exit_code=0)
        self.programs: list[str] = []

    @property
    def available(self) -> bool:
        return self._available

    async def run_python(self, code: str) -> ProcessOutput:
        self.programs.append(code)
        return self.output


class WebPages:
    """The web as a few pages; any other URL cannot be fetched (a ToolFailure, as the port says)."""

    def __init__(self, pages: Mapping[str, WebPage] | None = None) -> None:
        self.pages = dict(pages or {})

    async def read(self, url: str) -> WebPage:
        if url not in self.pages:
            raise ToolFailure(f"{url} could not be fetched")
        return self.pages[url]


class KeyHasher:
    """Keys `key-<n>` with prefix `p<n>`; a key verifies against the hash `hash:<key>`."""

    def __init__(self) -> None:
        self._minted = itertools.count(1)

    def mint(self) -> MintedKey:
        n = next(self._minted)
        return MintedKey(prefix=f"p{n}", plaintext=f"key-{n}", secret_hash=f"hash:key-{n}")

    def prefix_of(self, presented: str) -> str | None:
        return f"p{presented.removeprefix('key-')}" if presented.startswith("key-") else None

    def verify(self, presented: str, secret_hash: str) -> bool:
        return secret_hash == f"hash:{presented}"


class TemplateFiles:
    """The prompts directory: templates for one organization."""

    def __init__(self, org_id: OrgId | None = None, *templates: FileTemplate) -> None:
        self.org_id, self.templates = org_id, list(templates)

    async def for_org(self, org_id: OrgId) -> Sequence[FileTemplate]:
        return self.templates if org_id == self.org_id else []
