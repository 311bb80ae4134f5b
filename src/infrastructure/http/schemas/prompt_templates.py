from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from pydantic import ConfigDict, Field, StrictBool, StringConstraints

from application.caller import Caller
from application.use_cases.prompt_templates import (
    RenderDraftCommand,
    SaveTemplateCommand,
    TemplateChanges,
    TemplateView,
)
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
    """An argument of a prompt template."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
    """The argument's name, used as `{name}` in the messages"""
    description: Text = ""
    """What it is (shown to MCP clients)"""
    required: StrictBool = False
    """Whether rendering needs it"""
    type: ArgumentType = ArgumentType.STRING
    """`string`, or `array` (joined with commas)"""
    default: Value | list[Value] | None = None
    """Used when the argument is not given"""
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
    """A message of a prompt template."""

    role: Literal["system", "developer", "user", "assistant"]
    """Who speaks it"""
    content: Annotated[str, StringConstraints(min_length=1, max_length=CONTENT_MAX, strict=True)]
    """Its text, with `{argument}` placeholders"""


class TemplateCreate(RequestModel):
    """A new prompt template (admins)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "summarize",
                    "description": "Summarize a text",
                    "arguments": [{"name": "text", "required": True}],
                    "messages": [{"role": "user", "content": "Summarize: {text}"}],
                    "agent_id": "01a20800-0000-7000-8000-000000000000",
                }
            ]
        }
    )

    name: Name
    """Unique in the organization; its MCP prompt name"""
    description: Text = ""
    """What it is for (shown to MCP clients)"""
    arguments: list[ArgumentIn] = Field(default_factory=list, max_length=ARGUMENTS_MAX)
    """Its arguments"""
    messages: list[MessageIn] = Field(min_length=1, max_length=MESSAGES_MAX)
    """Its messages"""
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
    """Changes to a prompt template: only the fields sent change."""

    name: Name | None = None
    """New name"""
    description: Text | None = None
    """What it is for"""
    arguments: list[ArgumentIn] | None = Field(default=None, max_length=ARGUMENTS_MAX)
    """Its arguments (replace the list)"""
    messages: list[MessageIn] | None = Field(default=None, min_length=1, max_length=MESSAGES_MAX)
    """Its messages (replace the list)"""
    agent_id: UUID | None = None
    """The agent that answers the rendered prompt"""

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
    """An argument of a prompt template."""

    name: str
    """The argument's name"""
    description: str
    """What it is"""
    required: bool
    """Whether rendering needs it"""
    type: ArgumentType
    """`string` or `array`"""
    default: str | list[str] | None
    """Used when the argument is not given"""
    autocomplete: list[str] | bool
    """Values suggested, or true when the values used before are suggested"""


class TemplateMessageOut(ResponseModel):
    """A message of a prompt template."""

    role: str
    """Who speaks it"""
    content: str
    """Its text, with `{argument}` placeholders"""


class TemplateOut(ResponseModel):
    """A prompt template: messages with arguments, published over MCP as a tool and a prompt."""

    name: str
    """Its name; its MCP prompt name"""
    tool_name: str = Field(description="Its MCP tool name (hyphens become underscores); its MCP prompt keeps `name`")
    description: str
    """What it is for"""
    arguments: list[ArgumentOut]
    """Its arguments"""
    messages: list[TemplateMessageOut]
    """Its messages"""
    agent_id: UUID | None
    """The agent that answers the rendered prompt"""
    agent_slug: str | None = Field(description="For templates of the prompts directory: the agent the file names")
    source: Literal["api", "file"]
    """`api` (made through the API) or `file` (the prompts directory)"""
    created_at: datetime | None
    """When it was created (null for files)"""
    updated_at: datetime | None
    """When it last changed (null for files)"""

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
            messages=[TemplateMessageOut.model_validate(m) for m in template.messages],
            agent_id=template.agent_id,
            agent_slug=view.agent_slug,
            source="file" if view.from_file else "api",
            created_at=template.created_at,
            updated_at=template.updated_at,
        )


class RenderIn(RequestModel):
    """Argument values to render a template with."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"arguments": {"text": "The meeting moved to Tuesday."}}]}
    )

    arguments: dict[str, Value | list[Value]] = Field(default_factory=dict, max_length=ARGUMENTS_MAX)
    """Values by argument name (a list for array arguments)"""


class DraftIn(RequestModel):
    """A template as it would be saved: its arguments and messages."""

    arguments: list[ArgumentIn] = Field(default_factory=list, max_length=ARGUMENTS_MAX)
    """Its arguments"""
    messages: list[MessageIn] = Field(min_length=1, max_length=MESSAGES_MAX)
    """Its messages"""


class DraftRenderIn(RequestModel):
    """A template not saved yet, and values to render it with."""

    template: DraftIn = Field(description="The template's arguments and messages, as they would be saved")
    arguments: dict[str, Value | list[Value]] = Field(
        default_factory=dict, max_length=ARGUMENTS_MAX, description="The values to substitute"
    )

    def to_command(self, caller: Caller) -> RenderDraftCommand:
        return RenderDraftCommand(
            caller=caller,
            messages=tuple(TemplateMessage(role=m.role, content=m.content) for m in self.template.messages),
            template_arguments=tuple(a.to_domain() for a in self.template.arguments),
            arguments=self.arguments,
        )


class RenderOut(ResponseModel):
    """A template's messages with the arguments substituted."""

    messages: list[TemplateMessageOut]
    """The rendered messages"""
