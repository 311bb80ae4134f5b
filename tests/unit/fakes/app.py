"""The application wired on fakes, as the container wires it on adapters: for unit tests of use cases."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from uuid import UUID

from application.caller import Caller
from application.retrieval import PassageSearch
from application.runs.answer_questions import AnswerQuestions
from application.runs.ask_agent import AskAgent
from application.runs.execute_run import ExecuteRun
from application.runs.model_call import ModelCall
from application.runs.recorder import RunRecorder
from application.runs.tools.assembly import ToolAssembler
from application.runs.tools.calls import ToolCalls, ToolLimits
from application.runs.tools.handler import ToolHandler
from application.runs.tools.mcp import McpPromptRetrieval, McpResourceRetrieval, McpToolCall
from application.runs.tools.native import CodeExecution, InternetSearch, RunCommand, SourceQuery, WebsiteContent
from application.runs.tools.sub_agents import SubAgentCall
from application.use_cases.mcp_operations import ExecuteMcpTool, GetMcpPrompt, RetrieveMcpResource
from domain.agents import Agent
from domain.api_keys import Role
from domain.ids import OrgId
from domain.integrations import McpIntegration
from domain.organizations import Organization
from domain.threads import Thread
from domain.tools import ToolType
from tests import builders
from tests.unit.fakes.persistence import FakeUnitOfWork, Store
from tests.unit.fakes.ports import (
    Commands,
    FakeGateway,
    FixedClock,
    KeyHasher,
    OperatorServers,
    Outbound,
    PlainSecrets,
    RecordingBus,
    RecordingExecutor,
    RecordingTracer,
    Sandbox,
    ScriptedModel,
    Search,
    SequentialIds,
    TemplateFiles,
    WebPages,
)


@dataclass
class FakeApp:
    store: Store = field(default_factory=Store)
    clock: FixedClock = field(default_factory=FixedClock)
    ids: SequentialIds = field(default_factory=SequentialIds)
    bus: RecordingBus = field(default_factory=RecordingBus)
    executor: RecordingExecutor = field(default_factory=RecordingExecutor)
    tracer: RecordingTracer = field(default_factory=RecordingTracer)
    model: ScriptedModel = field(default_factory=ScriptedModel)
    gateway: FakeGateway = field(default_factory=FakeGateway)
    secrets: PlainSecrets = field(default_factory=PlainSecrets)
    commands: Commands = field(default_factory=Commands)
    search: Search = field(default_factory=lambda: Search(available=False))
    sandbox: Sandbox = field(default_factory=lambda: Sandbox(available=False))
    web_pages: WebPages = field(default_factory=WebPages)
    hasher: KeyHasher = field(default_factory=KeyHasher)
    outbound: Outbound = field(default_factory=Outbound)
    servers: OperatorServers = field(default_factory=OperatorServers)
    files: TemplateFiles = field(default_factory=TemplateFiles)
    limits: ToolLimits = field(default_factory=ToolLimits)
    max_delegation_depth: int = 3
    extra_handlers: Mapping[ToolType, ToolHandler] = field(default_factory=dict)
    """Handlers that replace the usual ones for their tool type."""
    without_handlers: frozenset[ToolType] = frozenset()
    """Tool types this server has no handler for."""

    @property
    def uow(self) -> FakeUnitOfWork:
        return FakeUnitOfWork(self.store)

    # -- the run loop, wired as the container wires it --------------------------------------------

    def execute_run(self) -> ExecuteRun:
        return ExecuteRun(
            recorder=RunRecorder(self.uow, self.clock, self.ids, self.bus),
            assembler=self.assembler(),
            model=ModelCall(self.model, self.ids, self.clock),
            tools=ToolCalls(self.handlers(), self.limits),
            tracer=self.tracer,
        )

    def ask_agent(self) -> AskAgent:
        return AskAgent(
            self.uow,
            self.clock,
            self.ids,
            self.bus,
            self.execute_run,
            lambda: AnswerQuestions(self.uow, self.clock, self.bus, executor=None),
        )

    def assembler(self) -> ToolAssembler:
        return ToolAssembler(self.uow, self.secrets, self.gateway, self.commands, self.search, self.sandbox)

    def handlers(self) -> dict[ToolType, ToolHandler]:
        uow, gateway, secrets = self.uow, self.gateway, self.secrets
        retrieve = RetrieveMcpResource(uow, self.clock, self.ids, secrets, gateway, max_source_bytes=1_000_000)
        handlers: dict[ToolType, ToolHandler] = {
            ToolType.MCP_PROMPT: McpPromptRetrieval(GetMcpPrompt(uow, secrets, gateway)),
            ToolType.MCP_RESOURCE: McpResourceRetrieval(retrieve),
            ToolType.MCP_TOOL: McpToolCall(ExecuteMcpTool(uow, secrets, gateway)),
            ToolType.SOURCE_QUERY: SourceQuery(PassageSearch(uow, None)),
            ToolType.WEBSITE_CONTENT: WebsiteContent(self.web_pages),
            ToolType.INTERNET_SEARCH: InternetSearch(self.search),
            ToolType.COMMAND: RunCommand(self.commands),
            ToolType.CODE_EXECUTION: CodeExecution(self.sandbox),
            ToolType.AGENT: SubAgentCall(uow, self.ask_agent(), self.max_delegation_depth),
        }
        handlers |= self.extra_handlers
        return {t: h for t, h in handlers.items() if t not in self.without_handlers}

    # -- what tests start from --------------------------------------------------------------------

    async def organization(self) -> Organization:
        org = builders.organization()
        async with self.uow as uow:
            await uow.organizations.add(org)
            await uow.commit()
        return org

    async def agent(self, org: Organization, **fields: object) -> Agent:
        agent = builders.agent(org.id, **fields)
        async with self.uow as uow:
            await uow.agents.add(agent)
            await uow.commit()
        return agent

    async def integration(self, org: Organization, **fields: object) -> McpIntegration:
        integration = builders.integration(org.id, **fields)
        async with self.uow as uow:
            await uow.integrations.add(integration)
            await uow.commit()
        return integration

    async def thread(self, agent: Agent) -> Thread:
        thread = builders.thread(agent.org_id, agent_id=agent.id)
        async with self.uow as uow:
            await uow.threads.add(thread)
            await uow.commit()
        return thread


def admin(org: Organization | OrgId) -> Caller:
    return Caller(org_id=org if isinstance(org, UUID) else org.id, role=Role.ADMIN)


def member(org: Organization | OrgId) -> Caller:
    return Caller(org_id=org if isinstance(org, UUID) else org.id, role=Role.MEMBER)
