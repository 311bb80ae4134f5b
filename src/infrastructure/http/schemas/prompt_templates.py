from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from pydantic import Field, StrictBool, StringConstraints

from application.caller import Caller
from application.use_cases.prompt_templates import SaveTemplateCommand, TemplateChanges, TemplateView
from domain.ids import AgentId
from domain.prompt_templates import (
    ARGUMENTS_MAX,
    CONTENT_MAX,
    DESCRIPTION_MAX,
    MESSAGES_MAX,
    ArgumentType,
    TemplateArgument,
    TemplateMessage,
)
from infrastructure.http.schemas.common import PatchModel, RequestModel, ResponseModel

Name = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")]
Text = Annotated[str, StringConstraints(max_length=DESCRIPTION_MAX, strict=True)]
Value = Annotated[str, StringConstraints(max_length=10_000, strict=True)]


class ArgumentIn(RequestModel):
    name: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
    description: Text = ""
    required: StrictBool = False
    type: ArgumentType = ArgumentType.STRING
    default: Value | list[Value] | None = None
    autocomplete: list[Value] | StrictBool = Field(
        default=False, description="Values to suggest, or true to suggest the values used before"
    )

    def to_domain(self) -> TemplateArgument:
        default = tuple(self.default) if isinstance(self.default, list) else self.default
        listed = tuple(self.autocomplete) if isinstance(self.autocomplete, list) else ()
        return TemplateArgument(
            name=self.name,
            description=self.description,
            required=self.required,
            type=self.type,
            default=default,
            autocomplete=listed,
            remember=self.autocomplete is True,
        )


class MessageIn(RequestModel):
    role: Literal["system", "developer", "user", "assistant"]
    content: Annotated[str, StringConstraints(min_length=1, max_length=CONTENT_MAX, strict=True)]


class TemplateCreate(RequestModel):
    name: Name
    description: Text = ""
    arguments: list[ArgumentIn] = Field(default_factory=list, max_length=ARGUMENTS_MAX)
    messages: list[MessageIn] = Field(min_length=1, max_length=MESSAGES_MAX)
    agent_id: UUID = Field(description="The agent that answers the rendered prompt")

    def to_command(self, caller: Caller) -> SaveTemplateCommand:
        return SaveTemplateCommand(
            caller=caller,
            name=self.name,
            description=self.description,
            arguments=tuple(a.to_domain() for a in self.arguments),
            messages=tuple(TemplateMessage(role=m.role, content=m.content) for m in self.messages),
            agent_id=AgentId(self.agent_id),
        )


class TemplateUpdate(PatchModel):
    name: Name | None = None
    description: Text | None = None
    arguments: list[ArgumentIn] | None = Field(default=None, max_length=ARGUMENTS_MAX)
    messages: list[MessageIn] | None = Field(default=None, min_length=1, max_length=MESSAGES_MAX)
    agent_id: UUID | None = None

    def changes(self) -> TemplateChanges:
        return TemplateChanges(
            name=self.name,
            description=self.description,
            arguments=tuple(a.to_domain() for a in self.arguments) if self.arguments is not None else None,
            messages=tuple(TemplateMessage(role=m.role, content=m.content) for m in self.messages)
            if self.messages is not None
            else None,
            agent_id=AgentId(self.agent_id) if self.agent_id else None,
        )


class ArgumentOut(ResponseModel):
    name: str
    description: str
    required: bool
    type: ArgumentType
    default: str | list[str] | None
    autocomplete: list[str] | bool


class MessageOut(ResponseModel):
    role: str
    content: str


class TemplateOut(ResponseModel):
    name: str
    tool_name: str = Field(description="Its MCP tool name (hyphens become underscores); its MCP prompt keeps `name`")
    description: str
    arguments: list[ArgumentOut]
    messages: list[MessageOut]
    agent_id: UUID | None
    agent_slug: str | None = Field(description="For templates of the prompts directory: the agent the file names")
    source: Literal["api", "file"]
    created_at: datetime | None
    updated_at: datetime | None

    @classmethod
    def of(cls, view: TemplateView) -> "TemplateOut":
        # The view joins the template with where it comes from; `autocomplete` merges two argument fields.
        template = view.template
        return cls(
            name=template.name,
            tool_name=template.tool_name,
            description=template.description,
            arguments=[
                ArgumentOut(
                    name=a.name,
                    description=a.description,
                    required=a.required,
                    type=a.type,
                    default=list(a.default) if isinstance(a.default, tuple) else a.default,
                    autocomplete=True if a.remember else list(a.autocomplete),
                )
                for a in template.arguments
            ],
            messages=[MessageOut.model_validate(m) for m in template.messages],
            agent_id=template.agent_id,
            agent_slug=view.agent_slug,
            source="file" if view.from_file else "api",
            created_at=template.created_at,
            updated_at=template.updated_at,
        )


class RenderIn(RequestModel):
    arguments: dict[str, Value | list[Value]] = Field(default_factory=dict, max_length=ARGUMENTS_MAX)


class RenderOut(ResponseModel):
    messages: list[MessageOut]
