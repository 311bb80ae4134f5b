from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, kw_only=True)
class MintedKey:
    prefix: str
    plaintext: str
    secret_hash: str


class KeyHasher(Protocol):
    """Makes API key secrets and checks presented ones against their stored hash."""

    def mint(self) -> MintedKey: ...

    def prefix_of(self, presented: str) -> str | None:
        """The lookup prefix of a presented key, or None when it is not shaped like our keys."""
        ...

    def verify(self, presented: str, secret_hash: str) -> bool: ...
