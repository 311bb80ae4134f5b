"""What Threadline knows of the models it calls: how many tokens fit in each one's context window."""

from dataclasses import dataclass

DEFAULT_CONTEXT_TOKENS = 32_768
"""The context window assumed for a model the catalog does not know (an operator may set another one):
small enough for most models served today, so a long thread is trimmed rather than refused."""
DEFAULT_ANSWER_TOKENS = 4_096
"""Room kept for the answer when the agent sets no max_tokens (at most a quarter of the window)."""


@dataclass(frozen=True, kw_only=True)
class ModelLimits:
    context_tokens: int
    """Tokens of one request and its answer together."""


_CATALOG: dict[str, ModelLimits] = {
    "gpt-5": ModelLimits(context_tokens=400_000),
    "gpt-4.1": ModelLimits(context_tokens=1_047_576),
    "gpt-4o": ModelLimits(context_tokens=128_000),
    "gpt-4-turbo": ModelLimits(context_tokens=128_000),
    "gpt-4": ModelLimits(context_tokens=8_192),
    "gpt-3.5-turbo": ModelLimits(context_tokens=16_385),
    "o1": ModelLimits(context_tokens=200_000),
    "o1-mini": ModelLimits(context_tokens=128_000),
    "o3": ModelLimits(context_tokens=200_000),
    "o4-mini": ModelLimits(context_tokens=200_000),
}
"""Model families by name prefix; the longest matching one wins (`gpt-4o-mini-2024-07-18` is a `gpt-4o`)."""


def known_limits(model: str) -> ModelLimits | None:
    """The limits of a model the catalog knows, by its family (a provider prefix like `openai/` is ignored)."""
    name = model.rsplit("/", 1)[-1].strip().lower()
    for family in sorted(_CATALOG, key=len, reverse=True):
        if name == family or name.startswith(family + "-"):
            return _CATALOG[family]
    return None


def context_tokens(model: str, *, override: int | None = None, default: int = DEFAULT_CONTEXT_TOKENS) -> int:
    """The context window a run fits its requests to: the agent's own setting, else the catalog's, else `default`."""
    if override is not None:
        return override
    limits = known_limits(model)
    return limits.context_tokens if limits is not None else default


def answer_tokens(context: int, max_tokens: int | None) -> int:
    """The room kept for the answer in a window of `context` tokens: the agent's max_tokens, else a default."""
    if max_tokens is not None:
        return min(max_tokens, context // 2)
    return min(DEFAULT_ANSWER_TOKENS, context // 4)
