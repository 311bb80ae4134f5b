"""Fakes of our own ports, for unit tests of use cases."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from application.ports.mcp import (
    McpPromptInfo,
    McpResourceContent,
    McpResourceInfo,
    McpResourceTemplateInfo,
    McpServerInfo,
    McpTarget,
    McpToolInfo,
    McpToolResult,
)
from application.ports.native_tools import CommandSpec, ProcessOutput
from application.ports.tracing import Level
from domain.agents import Agent
from domain.ids import AgentId, IntegrationId, OrgId
from domain.integrations import McpIntegration
from domain.mcp_prompts import PromptResult
from domain.usage import Usage


@dataclass
class RecordedSpan:
    name: str
    input: Any
    metadata: dict[str, Any]
    ended: dict[str, Any] = field(default_factory=dict)

    def end(self, **details: Any) -> None:
        self.ended = details

    @property
    def level(self) -> Level:
        return self.ended.get("level", Level.DEFAULT)


class FakeTrace:
    trace_id = "trace-1"

    def __init__(self) -> None:
        self.spans: list[RecordedSpan] = []

    def span(self, name: str, *, input: Any = None, metadata: Mapping[str, Any] | None = None) -> RecordedSpan:
        span = RecordedSpan(name=name, input=input, metadata=dict(metadata or {}))
        self.spans.append(span)
        return span

    def generation(self, name: str, *, model: str, model_parameters: Mapping[str, Any], input: Any) -> RecordedSpan:
        return self.span(name, input=input, metadata={"model": model})

    def end(self, **details: Any) -> None:
        pass


class _Integrations:
    def __init__(self, items: Sequence[McpIntegration]) -> None:
        self.items = list(items)

    async def get_many(self, org_id: OrgId, ids: Sequence[IntegrationId]) -> Sequence[McpIntegration]:
        return [i for i in self.items if i.org_id == org_id and i.id in ids]

    async def get(self, org_id: OrgId, integration_id: IntegrationId) -> McpIntegration | None:
        return next((i for i in self.items if i.org_id == org_id and i.id == integration_id), None)


class _Agents:
    def __init__(self, items: Sequence[Agent]) -> None:
        self.items = list(items)

    async def get(self, org_id: OrgId, agent_id: AgentId) -> Agent | None:
        return next((a for a in self.items if a.org_id == org_id and a.id == agent_id), None)


class FakeUnitOfWork:
    """Enough of a unit of work for tool assembly and the MCP use cases."""

    def __init__(self, *, integrations: Sequence[McpIntegration] = (), agents: Sequence[Agent] = ()) -> None:
        self.integrations = _Integrations(integrations)
        self.agents = _Agents(agents)
        self.committed = False

    def read_only(self) -> "FakeUnitOfWork":
        return self

    async def __aenter__(self) -> "FakeUnitOfWork":
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def commit(self) -> None:
        self.committed = True


class FakeGateway:
    def __init__(
        self,
        *,
        tools: Sequence[McpToolInfo] = (),
        prompts: Sequence[McpPromptInfo] = (),
        resources: Sequence[McpResourceInfo] = (),
        prompt: PromptResult | None = None,
        failure: Exception | None = None,
    ) -> None:
        self.tools, self.prompts, self.resources = list(tools), list(prompts), list(resources)
        self.prompt = prompt
        self.failure = failure
        self.prompt_requests: list[tuple[str, dict[str, str]]] = []

    def _fail(self) -> None:
        if self.failure is not None:
            raise self.failure

    async def probe(self, target: McpTarget) -> McpServerInfo:
        raise NotImplementedError

    async def list_tools(self, target: McpTarget) -> Sequence[McpToolInfo]:
        self._fail()
        return self.tools

    async def list_resources(self, target: McpTarget) -> Sequence[McpResourceInfo]:
        self._fail()
        return self.resources

    async def list_resource_templates(self, target: McpTarget) -> Sequence[McpResourceTemplateInfo]:
        self._fail()
        return []

    async def list_prompts(self, target: McpTarget) -> Sequence[McpPromptInfo]:
        self._fail()
        return self.prompts

    async def call_tool(self, target: McpTarget, name: str, arguments: Mapping[str, Any]) -> McpToolResult:
        raise NotImplementedError

    async def read_resource(self, target: McpTarget, uri: str) -> Sequence[McpResourceContent]:
        raise NotImplementedError

    async def get_prompt(self, target: McpTarget, name: str, arguments: Mapping[str, str]) -> PromptResult:
        self._fail()
        self.prompt_requests.append((name, dict(arguments)))
        assert self.prompt is not None
        return self.prompt

    async def forget(self, integration_id: IntegrationId) -> None:
        pass


class PlainSecrets:
    def seal(self, plaintext: str) -> str:
        return plaintext

    def open(self, ciphertext: str) -> str:
        return ciphertext

    def rotate(self, ciphertext: str) -> str:
        return ciphertext


class NoCommands:
    def commands(self) -> Sequence[CommandSpec]:
        return []

    async def run(self, name: str, arguments: Sequence[str]) -> ProcessOutput:
        raise NotImplementedError


class Unavailable:
    available = False


ZERO = Usage()
