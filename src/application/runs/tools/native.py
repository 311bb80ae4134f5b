"""The native tools: searching the run's sources, the web, the operator's commands and code."""

import logging
import re
from collections.abc import Sequence

from application.errors import ToolFailure
from application.ports.llm import ModelToolCall
from application.ports.native_tools import CodeSandbox, CommandRunner, ProcessOutput, WebPageReader, WebSearch
from application.ports.persistence import UnitOfWork
from application.ports.tracing import Level
from application.runs.tools.handler import ToolContext, ToolOutcome
from domain.sources import Source
from domain.tools import Tool

logger = logging.getLogger(__name__)

PASSAGE_CHARS = 300
MAX_PASSAGES = 8
SOURCES_SEARCHED = 50


def _passages(source: Source, terms: Sequence[str]) -> list[str]:
    text = source.readable_text or ""
    lowered = text.lower()
    found: list[str] = []
    last_end = -1
    for match in re.finditer("|".join(re.escape(t) for t in terms), lowered):
        if match.start() < last_end:
            continue
        start = max(0, match.start() - PASSAGE_CHARS // 2)
        end = min(len(text), match.end() + PASSAGE_CHARS // 2)
        found.append(("…" if start else "") + text[start:end].strip() + ("…" if end < len(text) else ""))
        last_end = end
        if len(found) >= 3:
            break
    return found


class SourceQuery:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def __call__(self, call: ModelToolCall, tool: Tool, context: ToolContext) -> ToolOutcome:
        query = str(call.arguments.get("query") or "").strip()
        only = call.arguments.get("source_id")
        if not query:
            return ToolOutcome(text="Source query failed: query parameter is required", is_error=True)
        span = context.trace.span(
            "source_query", input=dict(call.arguments), metadata={"operationType": "source_query"}
        )
        async with self._uow.read_only() as uow:
            sources = await uow.sources.readable(
                context.org_id, thread_id=context.thread_id, agent_id=context.agent.id, limit=SOURCES_SEARCHED
            )
        if only:
            sources = [s for s in sources if str(s.id) == str(only)]
        terms = [t for t in re.findall(r"\w+", query.lower()) if len(t) > 1] or [query.lower()]
        results = []
        for source in sources:
            for passage in _passages(source, terms):
                results.append(f"[{source.name} ({source.id})] {passage}")
        if not sources:
            text = "There are no text sources in this thread yet."
        elif not results:
            text = f"No source mentions {query!r}. Sources searched: {', '.join(s.name for s in sources)}."
        else:
            text = "\n\n".join(results[:MAX_PASSAGES])
        span.end(output=text)
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
