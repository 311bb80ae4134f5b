import base64
import functools
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from domain.errors import DomainError

SCRYPT_SALT = b"threadline secret key v1"
"""The salt of passphrase derivation. It is fixed (and documented) so that every process and host given the
same THREADLINE_SECRET_KEY derives the same key; scrypt's cost is what slows down guessing. A generated
Fernet key (`threadline secrets generate`) needs no derivation at all."""
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**15, 8, 1
"""scrypt's cost: 32 MiB of memory and a fraction of a second, once per passphrase per process."""


class SecretUnreadable(DomainError):
    """A stored credential cannot be decrypted with any configured key (a key was removed too early)."""


def _fernet_key(key: str) -> Fernet | None:
    try:
        return Fernet(key.encode())
    except ValueError:
        return None


@functools.cache
def derived_key(passphrase: str) -> bytes:
    """The Fernet key a passphrase stands for: scrypt over the passphrase with the documented salt."""
    kdf = Scrypt(salt=SCRYPT_SALT, length=32, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P)
    return base64.urlsafe_b64encode(kdf.derive(passphrase.encode()))


def legacy_key(passphrase: str) -> bytes:
    """How releases before scrypt turned a passphrase into a key (one unsalted SHA-256). Still read, so that
    credentials they stored open; `threadline secrets rotate` re-encrypts them under the scrypt key."""
    return base64.urlsafe_b64encode(hashlib.sha256(passphrase.encode()).digest())


def _fernets(key: str) -> list[Fernet]:
    """A Fernet key as given; a passphrase as its scrypt derivation first, then its legacy one (read only)."""
    fernet = _fernet_key(key)
    if fernet is not None:
        return [fernet]
    return [Fernet(derived_key(key)), Fernet(legacy_key(key))]


class FernetSecretBox:
    """Credentials encrypted with the first configured key and readable with any of them, so the
    key can be rotated: put the new key first, run `threadline secrets rotate`, then drop the old."""

    def __init__(self, keys: list[str]) -> None:
        if not keys:
            raise ValueError("at least one secret key is needed")
        self._fernet = MultiFernet([fernet for key in keys for fernet in _fernets(key)])

    def seal(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode()

    def open(self, ciphertext: str) -> str:
        try:
            return self._fernet.decrypt(ciphertext.encode()).decode()
        except InvalidToken:
            raise SecretUnreadable("a stored credential cannot be decrypted with the configured secret keys") from None

    def rotate(self, ciphertext: str) -> str:
        """The credential encrypted under the first key (from an older key, or an older derivation)."""
        try:
            return self._fernet.rotate(ciphertext.encode()).decode()
        except InvalidToken:
            raise SecretUnreadable("a stored credential cannot be decrypted with the configured secret keys") from None
