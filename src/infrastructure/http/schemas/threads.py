from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import ConfigDict, Field, StringConstraints, field_validator

from application.caller import Caller
from application.use_cases.threads import CreateThreadCommand
from domain.ids import AgentId
from domain.messages import (
    IMAGE_URL_MAX,
    PARTS_MAX,
    TEXT_MAX,
    ContentPart,
    ImageContent,
    TextContent,
    part_to_dict,
)
from domain.threads import METADATA_KEY_MAX, METADATA_KEYS_MAX, METADATA_VALUE_MAX, THREAD_TITLE_MAX
from infrastructure.http.schemas.common import RequestModel, ResponseModel

MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=METADATA_KEY_MAX)]
MetadataValue = Annotated[str, StringConstraints(max_length=METADATA_VALUE_MAX, strict=True)]


class ThreadCreate(RequestModel):
    """A new thread, optionally bound to an agent."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"title": "First contact", "metadata": {"customer": "42"}}]}
    )

    agent_id: UUID | None = Field(default=None, description="The agent that answers in this thread by default")
    title: Annotated[str, StringConstraints(max_length=THREAD_TITLE_MAX, strict=True)] = ""
    """A title for people"""
    metadata: dict[MetadataKey, MetadataValue] = Field(default_factory=dict, max_length=METADATA_KEYS_MAX)
    """Your own string keys and values"""

    def to_command(self, caller: Caller) -> CreateThreadCommand:
        return CreateThreadCommand(
            caller=caller,
            agent_id=AgentId(self.agent_id) if self.agent_id else None,
            title=self.title,
            metadata=self.metadata,
        )


class ThreadOut(ResponseModel):
    """A thread: a conversation's messages, and the runs on it."""

    id: UUID
    """The thread's id"""
    agent_id: UUID | None
    """The agent that answers by default; null if none"""
    title: str
    """A title for people"""
    metadata: dict[str, str]
    """Your own string keys and values"""
    message_count: int
    """How many messages it holds"""
    created_at: datetime
    """When it was created"""
    updated_at: datetime
    """When it last changed"""


class TextPartIn(RequestModel):
    """A text part of a message."""

    type: Literal["text"]
    """Always `text`"""
    text: Annotated[str, StringConstraints(max_length=TEXT_MAX, strict=True)]
    """The text"""


class ImagePartIn(RequestModel):
    """An image part of a message: a URL, or base64 data with its mime type."""

    type: Literal["image"]
    """Always `image`"""
    url: Annotated[str, StringConstraints(max_length=IMAGE_URL_MAX)] | None = None
    """Where the model fetches the image"""
    data: str | None = Field(default=None, description="base64 image bytes (with mime_type)")
    mime_type: Literal["image/png", "image/jpeg", "image/gif", "image/webp"] | None = None
    """The type of `data`"""


PartIn = Annotated[TextPartIn | ImagePartIn, Field(discriminator="type")]


class MessageCreate(RequestModel):
    """A user message to append to the thread."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"content": "Hello, who are you?"}]})

    role: Literal["user"] = "user"
    """Always `user`: other roles come from runs"""
    content: (
        Annotated[str, StringConstraints(min_length=1, max_length=TEXT_MAX, strict=True)]
        | Annotated[list[PartIn], Field(min_length=1, max_length=PARTS_MAX)]
    ) = Field(description="Text, or a list of text and image parts")

    def parts(self) -> tuple[ContentPart, ...]:
        if isinstance(self.content, str):
            return (TextContent(text=self.content),)
        return tuple(
            TextContent(text=p.text)
            if isinstance(p, TextPartIn)
            else ImageContent(url=p.url, data=p.data, mime_type=p.mime_type)
            for p in self.content
        )


class MessageOut(ResponseModel):
    """A message of a thread."""

    id: UUID
    """The message's id"""
    thread_id: UUID
    """Its thread"""
    run_id: UUID | None
    """The run that wrote it; null for messages a client appended"""
    role: str
    """`system`, `user`, `assistant` or `tool`"""
    position: int = Field(description="1 for the thread's first message, then counting up")
    content: list[dict[str, Any]] = Field(description="Typed parts: text, image, tool_use, tool_result")
    created_at: datetime
    """When it was appended"""

    @field_validator("content", mode="before")
    @classmethod
    def _typed_parts(cls, parts: Sequence[ContentPart | dict[str, Any]]) -> list[dict[str, Any]]:
        return [p if isinstance(p, dict) else part_to_dict(p) for p in parts]
