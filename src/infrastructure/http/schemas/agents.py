from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StringConstraints, field_validator

from application.caller import Caller
from application.use_cases.agents import CreateAgentCommand, UpdateAgentCommand
from domain.agents import (
    AGENT_DESCRIPTION_MAX,
    AGENT_INSTRUCTIONS_MAX,
    AGENT_MODEL_MAX,
    AGENT_NAME_MAX,
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
    temperature: Annotated[Number, Field(ge=0, le=2)] | None = None
    top_p: Annotated[Number, Field(ge=0, le=1)] | None = None
    max_tokens: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    presence_penalty: Annotated[Number, Field(ge=-2, le=2)] | None = None
    frequency_penalty: Annotated[Number, Field(ge=-2, le=2)] | None = None
    seed: StrictInt | None = None

    def to_domain(self) -> ModelSettings:
        return ModelSettings(**self.model_dump(exclude_none=True))


class ToolRefIn(RequestModel):
    type: ToolType
    config: dict[str, Annotated[str, StringConstraints(max_length=200)]] = Field(default_factory=dict, max_length=16)

    def to_domain(self) -> ToolRef:
        return ToolRef(type=self.type, config=self.config)


class ToolRefOut(ResponseModel):
    type: ToolType
    config: dict[str, Any]


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
    name: Name
    slug: Slug | None = Field(default=None, description="Unique in the organization; derived from the name if absent")
    description: Description = ""
    instructions: Instructions = ""
    model: Model | None = Field(default=None, description="Model name; the server's default model if absent")
    model_settings: ModelSettingsIn = Field(default_factory=ModelSettingsIn)
    tools: list[ToolRefIn] = Field(default_factory=list, max_length=LINKS_MAX)
    mcp_integration_ids: list[UUID] = Field(default_factory=list, max_length=LINKS_MAX)
    sub_agent_ids: list[UUID] = Field(default_factory=list, max_length=LINKS_MAX)
    max_steps: MaxSteps = DEFAULT_MAX_STEPS
    parallel_tool_calls: StrictBool = True
    publish_as_mcp: StrictBool = False

    def to_command(self, caller: Caller) -> CreateAgentCommand:
        return CreateAgentCommand(caller=caller, **self._common())


class AgentUpdate(_AgentFields, PatchModel):
    """Only the fields sent are changed."""

    name: Name | None = None
    slug: Slug | None = None
    description: Description | None = None
    instructions: Instructions | None = None
    model: Model | None = None
    model_settings: ModelSettingsIn | None = None
    tools: list[ToolRefIn] | None = Field(default=None, max_length=LINKS_MAX)
    mcp_integration_ids: list[UUID] | None = Field(default=None, max_length=LINKS_MAX)
    sub_agent_ids: list[UUID] | None = Field(default=None, max_length=LINKS_MAX)
    max_steps: MaxSteps | None = None
    parallel_tool_calls: StrictBool | None = None
    publish_as_mcp: StrictBool | None = None

    def to_command(self, caller: Caller, agent_id: UUID) -> UpdateAgentCommand:
        return UpdateAgentCommand(caller=caller, agent_id=AgentId(agent_id), changes=AgentChanges(**self._common()))


class AgentOut(ResponseModel):
    id: UUID
    name: str
    slug: str
    description: str
    instructions: str
    model: str
    model_settings: dict[str, Any] = Field(description="Only the settings that are set")
    tools: list[ToolRefOut]
    mcp_integration_ids: list[UUID]
    sub_agent_ids: list[UUID]
    max_steps: int
    parallel_tool_calls: bool
    publish_as_mcp: bool
    created_at: datetime
    updated_at: datetime

    @field_validator("model_settings", mode="before")
    @classmethod
    def _settings_set(cls, settings: ModelSettings | dict[str, Any]) -> dict[str, Any]:
        return settings.as_dict() if isinstance(settings, ModelSettings) else settings
