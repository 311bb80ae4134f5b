from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from domain.ids import OrgId
from domain.prompt_templates import PromptTemplate


@dataclass(frozen=True, kw_only=True)
class FileTemplate:
    """A template read from the prompts directory, and the slug of the agent it names (if any)."""

    template: PromptTemplate
    agent_slug: str | None


class TemplateFiles(Protocol):
    """The templates of the operator's prompts directory, assigned to one organization by configuration."""

    async def for_org(self, org_id: OrgId) -> Sequence[FileTemplate]: ...
