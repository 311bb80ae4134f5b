from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from domain.ids import OrgId
from domain.native_tools import ToolRef
from domain.prompt_templates import PromptTemplate


@dataclass(frozen=True, kw_only=True)
class FileTemplate:
    """A template read from the prompts directory, and the slug of the agent it names (if any)."""

    template: PromptTemplate
    agent_slug: str | None


class TemplateFiles(Protocol):
    """The templates of the operator's prompts directory, assigned to one organization by configuration."""

    async def for_org(self, org_id: OrgId) -> Sequence[FileTemplate]: ...


@dataclass(frozen=True, kw_only=True)
class AgentFile:
    """An agent as a file defines it (a ChatMD file: name and slug from the file name, instructions from its
    system and developer messages, native tools from those it declares), and what an agent cannot keep."""

    name: str
    slug: str
    description: str
    instructions: str
    tools: tuple[ToolRef, ...]
    model: str | None
    warnings: tuple[str, ...]


class AgentFiles(Protocol):
    """Reads agent definition files; `threadline agents import` and the REST API read them the same way."""

    def read(self, text: str, file_name: str) -> AgentFile:
        """Raises InvalidAgentFile, naming every problem and its line, when the text defines no agent."""
        ...
