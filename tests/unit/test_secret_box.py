"""The secret box's keys: Fernet keys as given, passphrases stretched with scrypt (salt and cost documented),
and credentials stored under the single SHA-256 of older releases still readable until rotated."""

import base64
import hashlib

import pytest
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from infrastructure.security.secret_box import FernetSecretBox, SecretUnreadable

PASSPHRASE = "correct horse battery staple"


def scrypt_fernet(passphrase: str) -> Fernet:
    """The derivation the README documents: scrypt, salt "threadline secret key v1", N=2^15, r=8, p=1."""
    kdf = Scrypt(salt=b"threadline secret key v1", length=32, n=2**15, r=8, p=1)
    return Fernet(base64.urlsafe_b64encode(kdf.derive(passphrase.encode())))


def sha256_fernet(passphrase: str) -> Fernet:
    """How older releases turned a passphrase into a key."""
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(passphrase.encode()).digest()))


def test_a_passphrase_is_stretched_with_scrypt_not_one_sha256() -> None:
    sealed = FernetSecretBox([PASSPHRASE]).seal("token-123")
    assert scrypt_fernet(PASSPHRASE).decrypt(sealed.encode()) == b"token-123"
    with pytest.raises(InvalidToken):
        sha256_fernet(PASSPHRASE).decrypt(sealed.encode())


def test_a_fernet_key_is_used_as_it_is() -> None:
    key = Fernet.generate_key()
    sealed = FernetSecretBox([key.decode()]).seal("token-123")
    assert Fernet(key).decrypt(sealed.encode()) == b"token-123"


def test_a_credential_stored_under_the_old_derivation_opens_and_rotates_to_scrypt() -> None:
    stored = sha256_fernet(PASSPHRASE).encrypt(b"token-123").decode()
    box = FernetSecretBox([PASSPHRASE])
    assert box.open(stored) == "token-123"
    rotated = box.rotate(stored)
    assert scrypt_fernet(PASSPHRASE).decrypt(rotated.encode()) == b"token-123"
    with pytest.raises(InvalidToken):
        sha256_fernet(PASSPHRASE).decrypt(rotated.encode())


def test_a_new_key_takes_over_old_derivations_of_the_old_passphrase() -> None:
    stored = sha256_fernet("old passphrase").encrypt(b"token-123").decode()
    rotated = FernetSecretBox(["new passphrase", "old passphrase"]).rotate(stored)
    assert FernetSecretBox(["new passphrase"]).open(rotated) == "token-123"
    with pytest.raises(SecretUnreadable):
        FernetSecretBox(["old passphrase"]).open(rotated)
