"""Ports for the native tools that reach outside: the web, the operator's commands, a code sandbox.

Each raises ToolFailure with a message the model can read; nothing else escapes.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, kw_only=True)
class WebPage:
    url: str
    title: str | None
    text: str
    """The page's readable text (markup removed), possibly shortened."""


class WebPageReader(Protocol):
    async def read(self, url: str) -> WebPage:
        """Fetch an http(s) page through the outbound guard and return its readable text."""
        ...


@dataclass(frozen=True, kw_only=True)
class SearchHit:
    title: str
    url: str
    snippet: str


class WebSearch(Protocol):
    @property
    def available(self) -> bool:
        """False when the operator configured no search provider."""
        ...

    async def search(self, query: str, *, limit: int = 5) -> Sequence[SearchHit]: ...


@dataclass(frozen=True, kw_only=True)
class CommandSpec:
    name: str
    description: str


@dataclass(frozen=True, kw_only=True)
class ProcessOutput:
    output: str
    """stdout and stderr merged, shortened with a marker when too long."""
    exit_code: int | None
    """None when the process was stopped for taking too long."""
    timed_out: bool = False


class CommandRunner(Protocol):
    """The operator's shell wrappers: named commands a tenant's agent may run with arguments."""

    def commands(self) -> Sequence[CommandSpec]: ...

    async def run(self, name: str, arguments: Sequence[str]) -> ProcessOutput:
        """Run the command with the arguments appended, without a shell. Unknown name -> ToolFailure."""
        ...


class CodeSandbox(Protocol):
    @property
    def available(self) -> bool:
        """False unless the operator enabled code execution."""
        ...

    async def run_python(self, code: str) -> ProcessOutput: ...
