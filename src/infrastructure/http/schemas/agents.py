from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StringConstraints, field_validator

from application.caller import Caller
from application.use_cases.agents import CreateAgentCommand, ImportAgentCommand, ImportedAgent, UpdateAgentCommand
from domain.agents import (
    AGENT_DESCRIPTION_MAX,
    AGENT_INSTRUCTIONS_MAX,
    AGENT_MODEL_MAX,
    AGENT_NAME_MAX,
    CONTEXT_TOKENS_MAX,
    CONTEXT_TOKENS_MIN,
    DEFAULT_MAX_STEPS,
    LINKS_MAX,
    MAX_STEPS_LIMIT,
    AgentChanges,
    ModelSettings,
)
from domain.ids import AgentId, IntegrationId
from domain.native_tools import ToolRef
from domain.text import SLUG_MAX
from domain.tools import ToolType
from infrastructure.http.schemas.common import PatchModel, RequestModel, ResponseModel, Visible

Name = Annotated[str, StringConstraints(min_length=1, max_length=AGENT_NAME_MAX, strict=True), Visible]
Slug = Annotated[str, StringConstraints(min_length=1, max_length=SLUG_MAX, pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]
Description = Annotated[str, StringConstraints(max_length=AGENT_DESCRIPTION_MAX, strict=True)]
Instructions = Annotated[str, StringConstraints(max_length=AGENT_INSTRUCTIONS_MAX, strict=True)]
Model = Annotated[str, StringConstraints(min_length=1, max_length=AGENT_MODEL_MAX, strict=True)]
MaxSteps = Annotated[StrictInt, Field(ge=1, le=MAX_STEPS_LIMIT)]
Number = StrictFloat | StrictInt


class ModelSettingsIn(RequestModel):
    """Sampling settings passed to the model; a setting left out uses the provider's default."""

    temperature: Annotated[Number, Field(ge=0, le=2)] | None = None
    """Sampling temperature, 0-2"""
    top_p: Annotated[Number, Field(ge=0, le=1)] | None = None
    """Nucleus sampling: the probability mass considered, 0-1"""
    max_tokens: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    """Most tokens the model may write per call"""
    presence_penalty: Annotated[Number, Field(ge=-2, le=2)] | None = None
    """Penalty on tokens already present, -2 to 2"""
    frequency_penalty: Annotated[Number, Field(ge=-2, le=2)] | None = None
    """Penalty proportional to how often a token appeared, -2 to 2"""
    seed: StrictInt | None = None
    """Seed for reproducible sampling, where the provider supports it"""
    context_tokens: Annotated[StrictInt, Field(ge=CONTEXT_TOKENS_MIN, le=CONTEXT_TOKENS_MAX)] | None = None
    """Tokens the model's context window holds, when the model catalog does not know the model (or knows it
    wrong): each request of a run is fitted to it, the oldest messages left out first. Not sent to the model"""
    summarize_history: StrictBool | None = None
    """When a request cannot hold the whole thread, summarize the messages left out (one more call of the agent's
    model, reused by the run's later steps) and send the summary in their place. Not sent to the model"""

    def to_domain(self) -> ModelSettings:
        return ModelSettings(**self.model_dump(exclude_none=True))


class ToolRefIn(RequestModel):
    """A native tool the agent may call (see GET /v1/tools), with its settings."""

    type: ToolType
    """The native tool type"""
    config: dict[str, Annotated[str, StringConstraints(max_length=200)]] = Field(default_factory=dict, max_length=16)
    """The tool's settings, as its config_schema describes"""

    def to_domain(self) -> ToolRef:
        return ToolRef(type=self.type, config=self.config)


class ToolRefOut(ResponseModel):
    """A native tool the agent may call, with its settings."""

    type: ToolType
    """The native tool type"""
    config: dict[str, Any]
    """The tool's settings"""


class _AgentFields(RequestModel):
    def _common(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for name in self.model_fields_set:
            value = getattr(self, name)
            if value is None:
                continue
            if name == "model_settings":
                value = value.to_domain()
            elif name == "tools":
                value = tuple(t.to_domain() for t in value)
            elif name == "mcp_integration_ids":
                value = tuple(IntegrationId(i) for i in value)
            elif name == "sub_agent_ids":
                value = tuple(AgentId(i) for i in value)
            data[name] = value
        return data


class AgentCreate(_AgentFields):
    """A new agent: its model, instructions and tools."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"name": "Support Bot", "instructions": "Answer briefly.", "tools": [{"type": "source_query"}]}
            ]
        }
    )

    name: Name
    """Display name (no control or invisible characters)"""
    slug: Slug | None = Field(default=None, description="Unique in the organization; derived from the name if absent")
    description: Description = ""
    """What the agent is for (shown to MCP clients)"""
    instructions: Instructions = ""
    """The system prompt the model receives"""
    model: Model | None = Field(default=None, description="Model name; the server's default model if absent")
    model_settings: ModelSettingsIn = Field(default_factory=ModelSettingsIn)
    """Sampling settings sent with each model call"""
    tools: list[ToolRefIn] = Field(default_factory=list, max_length=LINKS_MAX)
    """Native tools the agent may call"""
    mcp_integration_ids: list[UUID] = Field(default_factory=list, max_length=LINKS_MAX)
    """MCP integrations whose tools the agent may call"""
    sub_agent_ids: list[UUID] = Field(default_factory=list, max_length=LINKS_MAX)
    """Agents it may hand work to, each offered as a tool `agent__<slug>`"""
    max_steps: MaxSteps = DEFAULT_MAX_STEPS
    """Most model calls in one run; the run fails with max_steps_exceeded beyond"""
    parallel_tool_calls: StrictBool = True
    """Whether tool calls of one step run at once"""
    publish_as_mcp: StrictBool = False
    """Offer the agent as a tool and a prompt of the /mcp server"""

    def to_command(self, caller: Caller) -> CreateAgentCommand:
        return CreateAgentCommand(caller=caller, **self._common())


class AgentUpdate(_AgentFields, PatchModel):
    """Only the fields sent are changed."""

    name: Name | None = None
    """Display name"""
    slug: Slug | None = None
    """Unique in the organization"""
    description: Description | None = None
    """What the agent is for"""
    instructions: Instructions | None = None
    """The system prompt the model receives"""
    model: Model | None = None
    """Model name"""
    model_settings: ModelSettingsIn | None = None
    """Sampling settings (replace the stored ones)"""
    tools: list[ToolRefIn] | None = Field(default=None, max_length=LINKS_MAX)
    """Native tools (replace the list)"""
    mcp_integration_ids: list[UUID] | None = Field(default=None, max_length=LINKS_MAX)
    """MCP integrations (replace the list)"""
    sub_agent_ids: list[UUID] | None = Field(default=None, max_length=LINKS_MAX)
    """Sub-agents (replace the list)"""
    max_steps: MaxSteps | None = None
    """Most model calls in one run"""
    parallel_tool_calls: StrictBool | None = None
    """Whether tool calls of one step run at once"""
    publish_as_mcp: StrictBool | None = None
    """Offer the agent over /mcp"""

    def to_command(self, caller: Caller, agent_id: UUID) -> UpdateAgentCommand:
        return UpdateAgentCommand(caller=caller, agent_id=AgentId(agent_id), changes=AgentChanges(**self._common()))


class AgentOut(ResponseModel):
    """An agent of the organization."""

    id: UUID
    """The agent's id"""
    name: str
    """Display name"""
    slug: str
    """Unique in the organization; names its tool as a sub-agent and over MCP"""
    description: str
    """What the agent is for"""
    instructions: str
    """The system prompt the model receives"""
    model: str
    """The model it calls"""
    model_settings: dict[str, Any] = Field(description="Only the settings that are set")
    tools: list[ToolRefOut]
    """Native tools it may call"""
    mcp_integration_ids: list[UUID]
    """MCP integrations whose tools it may call"""
    sub_agent_ids: list[UUID]
    """Agents it may hand work to"""
    max_steps: int
    """Most model calls in one run"""
    parallel_tool_calls: bool
    """Whether tool calls of one step run at once"""
    publish_as_mcp: bool
    """Whether /mcp offers it"""
    created_at: datetime
    """When it was created"""
    updated_at: datetime
    """When it last changed"""

    @field_validator("model_settings", mode="before")
    @classmethod
    def _settings_set(cls, settings: ModelSettings | dict[str, Any]) -> dict[str, Any]:
        return settings.as_dict() if isinstance(settings, ModelSettings) else settings


CHATMD_MAX = 1_000_000


class AgentImportIn(RequestModel):
    """A ChatMD file to create an agent from."""

    file_name: Annotated[str, StringConstraints(min_length=1, max_length=255, strict=True)] = Field(
        description="The file's name: the agent's name and slug come from it (`triage-bot.chatmd`: triage-bot)"
    )
    content: Annotated[str, StringConstraints(min_length=1, max_length=CHATMD_MAX, strict=True)] = Field(
        description="The ChatMD document, as `threadline agents import` reads it"
    )
    model: Model | None = Field(default=None, description="The agent's model (else the file's, else the default)")
    dry_run: StrictBool = Field(default=False, description="Only say what the agent would be; create nothing")

    def to_command(self, caller: Caller) -> ImportAgentCommand:
        return ImportAgentCommand(
            caller=caller, text=self.content, file_name=self.file_name, model=self.model, dry_run=self.dry_run
        )


class AgentFileOut(ResponseModel):
    """The agent the file defines."""

    name: str
    """Name from the file"""
    slug: str
    """Slug from the file's name"""
    description: str
    """Description from the file"""
    instructions: str
    """Instructions from the file"""
    model: str | None = Field(description="The file's model (<config model=...>); null: the default model")
    tools: list[ToolRefOut]
    """Native tools the file names"""


class AgentImportOut(ResponseModel):
    """What importing a ChatMD file gave."""

    agent: AgentOut | None = Field(description="The agent created; null on a dry run")
    file: AgentFileOut
    """The agent the file defines"""
    warnings: list[str] = Field(description="What the file has that an agent does not keep, and why")

    @classmethod
    def of(cls, imported: ImportedAgent) -> "AgentImportOut":
        return cls(
            agent=AgentOut.model_validate(imported.agent) if imported.agent else None,
            file=AgentFileOut.model_validate(imported.file),
            warnings=list(imported.file.warnings),
        )
