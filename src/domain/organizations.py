from dataclasses import dataclass
from datetime import datetime

from domain.errors import InvalidValue
from domain.ids import OrgId
from domain.text import require_slug, require_text

ORG_NAME_MAX = 200
LIMIT_MAX = 1_000_000
DEFAULT_SEARCH_LANGUAGE = "english"
SEARCH_LANGUAGES = frozenset(
    {
        "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english", "finnish", "french", "german",
        "greek", "hindi", "hungarian", "indonesian", "irish", "italian", "lithuanian", "nepali", "norwegian",
        "portuguese", "romanian", "russian", "serbian", "simple", "spanish", "swedish", "tamil", "turkish",
        "yiddish",
    }
)  # fmt: skip
"""The languages sources are searched in: PostgreSQL's built-in text search configurations (`simple`: words as
they are, no stemming, no stop words)."""


@dataclass(frozen=True, kw_only=True)
class RunLimits:
    """The limits an organization's runs are held to."""

    max_concurrent_runs: int
    runs_per_minute: int | None
    """None: no limit."""


@dataclass(kw_only=True)
class Organization:
    """The tenant: everything else belongs to exactly one organization."""

    id: OrgId
    name: str
    slug: str
    created_at: datetime
    max_concurrent_runs: int | None = None
    """Runs of the organization that execute at once; the others wait queued. None: the deployment's limit."""
    runs_per_minute: int | None = None
    """Runs the organization may start per minute (API, OpenAI-compatible routes, /mcp tool calls). None: the
    deployment's limit."""
    search_language: str = DEFAULT_SEARCH_LANGUAGE
    """The language its sources' words are stemmed and searched in."""

    def __post_init__(self) -> None:
        require_text("name", self.name, max_length=ORG_NAME_MAX)
        require_slug("slug", self.slug)
        self.set_limits(max_concurrent_runs=self.max_concurrent_runs, runs_per_minute=self.runs_per_minute)
        self.set_search_language(self.search_language)

    def set_search_language(self, language: str) -> None:
        if language not in SEARCH_LANGUAGES:
            known = ", ".join(sorted(SEARCH_LANGUAGES))
            raise InvalidValue(f"search_language must be one of: {known} (not {language!r})")
        self.search_language = language

    def limits_under(self, deployment: RunLimits) -> RunLimits:
        """The limits that hold for the organization: its own where it has them, else the deployment's."""
        return effective_limits(self.max_concurrent_runs, self.runs_per_minute, deployment)

    def set_limits(self, *, max_concurrent_runs: int | None, runs_per_minute: int | None) -> None:
        """The organization's own limits (None for the deployment's)."""
        for name, value in (("max_concurrent_runs", max_concurrent_runs), ("runs_per_minute", runs_per_minute)):
            if value is not None and not (1 <= value <= LIMIT_MAX):
                raise InvalidValue(f"{name} must be 1-{LIMIT_MAX}, or unset for the deployment's limit")
        self.max_concurrent_runs, self.runs_per_minute = max_concurrent_runs, runs_per_minute


def effective_limits(max_concurrent_runs: int | None, runs_per_minute: int | None, deployment: RunLimits) -> RunLimits:
    """An organization's own limits (None where it has none, as stored) over the deployment's."""
    return RunLimits(
        max_concurrent_runs=deployment.max_concurrent_runs if max_concurrent_runs is None else max_concurrent_runs,
        runs_per_minute=deployment.runs_per_minute if runs_per_minute is None else runs_per_minute,
    )
