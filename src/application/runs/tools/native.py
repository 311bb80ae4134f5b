"""The native tools: searching the run's sources, the web, the operator's commands and code."""

import logging
from uuid import UUID

from application.errors import ToolFailure
from application.ports.llm import ModelToolCall
from application.ports.native_tools import CodeSandbox, CommandRunner, ProcessOutput, WebPageReader, WebSearch
from application.ports.persistence import PassageHit, SearchScope
from application.ports.tracing import Level
from application.retrieval import PassageSearch
from application.runs.tools.handler import ToolContext, ToolOutcome
from domain.ids import SourceId
from domain.tools import Tool

logger = logging.getLogger(__name__)

SOURCE_QUERY_PASSAGES = 8
"""At most this many passages per source_query"""
SOURCE_QUERY_BUDGET = 6000
"""Characters of passages a source_query returns at most: the best passages whole, the last one cut."""
MIN_CUT_PASSAGE = 200
"""A passage cut to fewer characters than this is left out instead."""


def _hit_text(number: int, hit: PassageHit, room: int) -> str | None:
    """The passage under a header that says where it is from, cut to what is left of the budget
    (None when too little is left to be worth reading)."""
    where = f"source_id {hit.source_id}, passage {hit.passage.position}"
    header = f"[{number}] {hit.source_name} — {hit.passage.location} ({where})\n"
    body, left = hit.passage.text, room - len(header)
    if left < MIN_CUT_PASSAGE and len(body) > left:
        return None
    if len(body) > left:
        body = body[: left - 1].rstrip() + "…"
    return header + body


class SourceQuery:
    """source_query: search of the passages of the thread's sources and its agent's (full text, or hybrid with
    embeddings on); the best passages with their source, location and ids, within a character budget. The
    run's trace shows the query, how it was searched and the passages returned."""

    def __init__(self, search: PassageSearch) -> None:
        self._search = search

    async def __call__(self, call: ModelToolCall, tool: Tool, context: ToolContext) -> ToolOutcome:
        query = str(call.arguments.get("query") or "").strip()
        if not query:
            return ToolOutcome(text="Source query failed: query parameter is required", is_error=True)
        only = call.arguments.get("source_id")
        try:
            source_id = SourceId(UUID(str(only))) if only else None
        except ValueError:
            return ToolOutcome(text=f"Source query failed: {only!r} is not a source id", is_error=True)
        span = context.trace.span(
            "source_query", input={"query": query, "source_id": only}, metadata={"operationType": "source_query"}
        )
        scope = SearchScope(thread_id=context.thread_id, agent_id=context.agent.id, source_id=source_id)
        found = await self._search.search(context.org_id, scope, query, limit=SOURCE_QUERY_PASSAGES)
        hits = found.hits
        parts: list[str] = []
        returned: list[dict[str, object]] = []
        room = SOURCE_QUERY_BUDGET
        for number, hit in enumerate(hits, start=1):
            part = _hit_text(number, hit, room)
            if part is None:
                break
            room -= len(part) + 2
            parts.append(part)
            returned.append(
                {
                    "source_id": str(hit.source_id),
                    "source_name": hit.source_name,
                    "position": hit.passage.position,
                    "location": hit.passage.location,
                    "score": round(hit.score, 4),
                }
            )
        if parts:
            text = "\n\n".join(parts)
        elif source_id is not None:
            text = f"No passage of source {source_id} matches {query!r}."
        else:
            text = f"No passage of this thread's sources matches {query!r}."
        span.end(output={"mode": found.mode.value, "note": found.note, "passages": returned, "text": text})
        return ToolOutcome(text=text)


def _process_text(output: ProcessOutput) -> str:
    status = "stopped: it took too long" if output.timed_out else f"exit code {output.exit_code}"
    return f"{output.output}\n[{status}]" if output.output else f"[no output; {status}]"


class _External:
    """A native tool that reaches outside; its failures are told to the model with the tool's label."""

    label = "Tool"
    span_name = "native_tool"

    async def __call__(self, call: ModelToolCall, tool: Tool, context: ToolContext) -> ToolOutcome:
        span = context.trace.span(self.span_name, input=dict(call.arguments), metadata={"toolName": tool.name})
        try:
            outcome = await self.run(call, tool)
        except ToolFailure as failure:
            logger.info("native tool failed", extra={"tool": tool.name, "error": failure.detail})
            span.end(output=f"{self.label} failed", level=Level.ERROR, status_message=failure.detail)
            return ToolOutcome(text=f"{self.label} failed: {failure.detail}", is_error=True)
        span.end(output=outcome.text, level=Level.ERROR if outcome.is_error else Level.DEFAULT)
        return outcome

    async def run(self, call: ModelToolCall, tool: Tool) -> ToolOutcome:
        raise NotImplementedError


class WebsiteContent(_External):
    label = "Fetching the page"
    span_name = "website_content"

    def __init__(self, reader: WebPageReader) -> None:
        self._reader = reader

    async def run(self, call: ModelToolCall, tool: Tool) -> ToolOutcome:
        url = str(call.arguments.get("url") or "")
        if not url:
            raise ToolFailure("url parameter is required")
        page = await self._reader.read(url)
        title = f"Title: {page.title}\n" if page.title else ""
        return ToolOutcome(text=f"{title}URL: {page.url}\n\n{page.text}")


class InternetSearch(_External):
    label = "Search"
    span_name = "internet_search"

    def __init__(self, search: WebSearch) -> None:
        self._search = search

    async def run(self, call: ModelToolCall, tool: Tool) -> ToolOutcome:
        query = str(call.arguments.get("query") or "").strip()
        if not query:
            raise ToolFailure("query parameter is required")
        hits = await self._search.search(query)
        if not hits:
            return ToolOutcome(text=f"No results for {query!r}.")
        return ToolOutcome(
            text="\n\n".join(f"{n}. {h.title}\n{h.url}\n{h.snippet}" for n, h in enumerate(hits, start=1))
        )


class RunCommand(_External):
    label = "Command"
    span_name = "command"

    def __init__(self, commands: CommandRunner) -> None:
        self._commands = commands

    async def run(self, call: ModelToolCall, tool: Tool) -> ToolOutcome:
        raw = call.arguments.get("arguments") or []
        if not isinstance(raw, list) or not all(isinstance(a, str | int | float) for a in raw):
            raise ToolFailure("arguments must be a list of strings")
        output = await self._commands.run(str(tool.metadata["command"]), [str(a) for a in raw])
        return ToolOutcome(text=_process_text(output), is_error=output.timed_out or output.exit_code != 0)


class CodeExecution(_External):
    label = "Code execution"
    span_name = "code_execution"

    def __init__(self, sandbox: CodeSandbox) -> None:
        self._sandbox = sandbox

    async def run(self, call: ModelToolCall, tool: Tool) -> ToolOutcome:
        code = str(call.arguments.get("code") or "")
        if not code.strip():
            raise ToolFailure("code parameter is required")
        output = await self._sandbox.run_python(code)
        return ToolOutcome(text=_process_text(output), is_error=output.timed_out or output.exit_code != 0)
