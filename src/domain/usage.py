from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Tokens a model call consumed; runs add up the usage of their model calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    """Of the input tokens, those the provider read from its prompt cache (0 when it does not say)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )
