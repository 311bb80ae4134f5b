import hashlib
import hmac
import re
import secrets

from application.ports.security import MintedKey

_KEY = re.compile(r"^tl_([a-z0-9]{12})_[A-Za-z0-9_-]{43}$")


class Sha256KeyHasher:
    """API keys look like `tl_<12-char prefix>_<43-char secret>`.

    The secret has 256 bits of entropy, so one SHA-256 is enough to store it safely; a slow
    password hash would only slow every request down.
    """

    def mint(self) -> MintedKey:
        prefix = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(12))
        plaintext = f"tl_{prefix}_{secrets.token_urlsafe(32)}"
        return MintedKey(prefix=prefix, plaintext=plaintext, secret_hash=self._digest(plaintext))

    def prefix_of(self, presented: str) -> str | None:
        match = _KEY.match(presented)
        return match.group(1) if match else None

    def verify(self, presented: str, secret_hash: str) -> bool:
        return hmac.compare_digest(self._digest(presented), secret_hash)

    @staticmethod
    def _digest(plaintext: str) -> str:
        return hashlib.sha256(plaintext.encode()).hexdigest()
