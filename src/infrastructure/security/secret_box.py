import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from domain.errors import DomainError


class SecretUnreadable(DomainError):
    """A stored credential cannot be decrypted with any configured key (a key was removed too early)."""


def _fernet(key: str) -> Fernet:
    """A Fernet key as given, or one derived from any other passphrase."""
    try:
        return Fernet(key.encode())
    except ValueError:
        return Fernet(base64.urlsafe_b64encode(hashlib.sha256(key.encode()).digest()))


class FernetSecretBox:
    """Credentials encrypted with the first configured key and readable with any of them, so the
    key can be rotated: put the new key first, run `threadline secrets rotate`, then drop the old."""

    def __init__(self, keys: list[str]) -> None:
        if not keys:
            raise ValueError("at least one secret key is needed")
        self._fernet = MultiFernet([_fernet(k) for k in keys])

    def seal(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode()

    def open(self, ciphertext: str) -> str:
        try:
            return self._fernet.decrypt(ciphertext.encode()).decode()
        except InvalidToken:
            raise SecretUnreadable("a stored credential cannot be decrypted with the configured secret keys") from None

    def rotate(self, ciphertext: str) -> str:
        try:
            return self._fernet.rotate(ciphertext.encode()).decode()
        except InvalidToken:
            raise SecretUnreadable("a stored credential cannot be decrypted with the configured secret keys") from None
