from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class PromptMessage:
    role: str
    content: str


@dataclass(frozen=True, kw_only=True)
class PromptResult:
    """A prompt as an MCP server's prompts/get returns it, its content rendered as text."""

    description: str | None
    messages: tuple[PromptMessage, ...]
