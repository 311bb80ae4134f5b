"""Ports of the secrets Threadline keeps: API key hashes, and credentials encrypted at rest."""

from dataclasses import dataclass
from typing import Protocol

from domain.api_keys import ApiKey
from domain.ids import ApiKeyId, OrgId


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


class VerifiedKeys(Protocol):
    """API keys verified lately, found by the secret presented, so a request need not read its key again.
    A key forgotten here (revoked, its organization deleted) is refused by the very next request."""

    def get(self, presented: str) -> ApiKey | None:
        """The active key this secret was verified as, if it still may be trusted without reading it."""
        ...

    def version(self) -> int:
        """Taken before a key is read from storage, and given back to `remember`."""
        ...

    def remember(self, presented: str, key: ApiKey, *, as_of: int) -> None:
        """Keep a key just verified, unless anything was forgotten since `as_of` (the read may have seen the
        key before its revocation). Only verified keys are kept: an unknown secret takes no room."""
        ...

    def forget_key(self, key_id: ApiKeyId) -> None: ...
    def forget_organization(self, org_id: OrgId) -> None: ...
