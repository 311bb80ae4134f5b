from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from domain.errors import InvalidValue
from domain.ids import AgentId, IntegrationId, OrgId
from domain.native_tools import ToolRef
from domain.text import require_slug, require_text

AGENT_NAME_MAX = 200
AGENT_DESCRIPTION_MAX = 2_000
AGENT_INSTRUCTIONS_MAX = 100_000
AGENT_MODEL_MAX = 200
MAX_STEPS_LIMIT = 100
DEFAULT_MAX_STEPS = 20
LINKS_MAX = 32
CONTEXT_TOKENS_MIN = 1_024
CONTEXT_TOKENS_MAX = 10_000_000


def _check_range(name: str, value: float | int | None, low: float, high: float) -> None:
    if value is not None and not (low <= value <= high):
        raise InvalidValue(f"model_settings.{name} must be between {low:g} and {high:g}")


@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    """Sampling settings passed to the model (unset values leave the provider's defaults), and the size of
    the model's context window when the model catalog does not know it or knows it wrong."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None
    context_tokens: int | None = None
    """Tokens the model's context window holds; a run's request is fitted to it. Not sent to the model."""
    summarize_history: bool | None = None
    """When a run's request cannot hold the whole thread, the messages left out are summarized by the agent's
    model and the summary sent in their place (else they are only left out). Not sent to the model."""

    def __post_init__(self) -> None:
        _check_range("temperature", self.temperature, 0, 2)
        _check_range("top_p", self.top_p, 0, 1)
        _check_range("max_tokens", self.max_tokens, 1, 1_000_000)
        _check_range("presence_penalty", self.presence_penalty, -2, 2)
        _check_range("frequency_penalty", self.frequency_penalty, -2, 2)
        _check_range("seed", self.seed, -(2**63), 2**63 - 1)
        _check_range("context_tokens", self.context_tokens, CONTEXT_TOKENS_MIN, CONTEXT_TOKENS_MAX)

    def as_dict(self) -> dict[str, Any]:
        """Only the settings that are set."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def sampling(self) -> "ModelSettings":
        """The settings the model itself is sent (the context window is Threadline's own concern)."""
        return replace(self, context_tokens=None, summarize_history=None)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelSettings":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidValue(f"unknown model settings: {', '.join(unknown)}")
        return cls(**data)


@dataclass(frozen=True, kw_only=True)
class AgentChanges:
    """A partial update of an agent: fields left None stay as they are."""

    name: str | None = None
    slug: str | None = None
    description: str | None = None
    instructions: str | None = None
    model: str | None = None
    model_settings: ModelSettings | None = None
    tools: Sequence[ToolRef] | None = None
    mcp_integration_ids: Sequence[IntegrationId] | None = None
    sub_agent_ids: Sequence[AgentId] | None = None
    max_steps: int | None = None
    parallel_tool_calls: bool | None = None
    publish_as_mcp: bool | None = None


def _unique(field_name: str, values: Sequence[Any]) -> tuple[Any, ...]:
    if len(values) > LINKS_MAX:
        raise InvalidValue(f"{field_name} may hold at most {LINKS_MAX} entries")
    if len(set(values)) != len(values):
        raise InvalidValue(f"{field_name} must not contain duplicates")
    return tuple(values)


@dataclass(kw_only=True)
class Agent:
    """A model with instructions and tools, owned by an organization."""

    id: AgentId
    org_id: OrgId
    name: str
    slug: str
    model: str
    created_at: datetime
    updated_at: datetime
    description: str = ""
    instructions: str = ""
    model_settings: ModelSettings = field(default_factory=ModelSettings)
    tools: tuple[ToolRef, ...] = ()
    mcp_integration_ids: tuple[IntegrationId, ...] = ()
    sub_agent_ids: tuple[AgentId, ...] = ()
    max_steps: int = DEFAULT_MAX_STEPS
    parallel_tool_calls: bool = True
    publish_as_mcp: bool = False

    def __post_init__(self) -> None:
        self._check()

    def _check(self) -> None:
        require_text("name", self.name, max_length=AGENT_NAME_MAX)
        require_slug("slug", self.slug)
        require_text("description", self.description, max_length=AGENT_DESCRIPTION_MAX, allow_empty=True)
        require_text("instructions", self.instructions, max_length=AGENT_INSTRUCTIONS_MAX, allow_empty=True)
        require_text("model", self.model, max_length=AGENT_MODEL_MAX)
        if isinstance(self.max_steps, bool) or not (1 <= self.max_steps <= MAX_STEPS_LIMIT):
            raise InvalidValue(f"max_steps must be between 1 and {MAX_STEPS_LIMIT}")
        self.tools = tuple(self.tools)
        if len({ref.key for ref in self.tools}) != len(self.tools):
            raise InvalidValue("tools must not list the same tool twice")
        self.mcp_integration_ids = _unique("mcp_integration_ids", self.mcp_integration_ids)
        self.sub_agent_ids = _unique("sub_agent_ids", self.sub_agent_ids)
        if self.id in self.sub_agent_ids:
            raise InvalidValue("an agent cannot be its own sub-agent")

    def apply(self, changes: AgentChanges, now: datetime) -> None:
        """Apply a partial update; on a broken rule the agent is left as it was."""
        updates = {f.name: getattr(changes, f.name) for f in fields(changes) if getattr(changes, f.name) is not None}
        if not updates:
            return
        candidate = replace(self, **updates, updated_at=now)  # runs every check on the result
        for name in (*updates, "updated_at"):
            setattr(self, name, getattr(candidate, name))

    def forget_sub_agent(self, agent_id: AgentId, now: datetime) -> bool:
        if agent_id not in self.sub_agent_ids:
            return False
        self.sub_agent_ids = tuple(a for a in self.sub_agent_ids if a != agent_id)
        self.updated_at = now
        return True

    def forget_integration(self, integration_id: IntegrationId, now: datetime) -> bool:
        if integration_id not in self.mcp_integration_ids:
            return False
        self.mcp_integration_ids = tuple(i for i in self.mcp_integration_ids if i != integration_id)
        self.updated_at = now
        return True
