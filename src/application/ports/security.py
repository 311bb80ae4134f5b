"""Ports of the secrets Threadline keeps: API key hashes, and credentials encrypted at rest."""

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


class SecretBox(Protocol):
    """Encrypts credentials for storage and decrypts them for use."""

    def seal(self, plaintext: str) -> str: ...
    def open(self, ciphertext: str) -> str: ...
    def rotate(self, ciphertext: str) -> str:
        """The same secret, encrypted again with the current key."""
        ...
