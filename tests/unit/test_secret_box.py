"""The secret box's keys: generated once when none is configured, Fernet keys as given, passphrases stretched
with scrypt (salt and cost documented), and credentials stored under the single SHA-256 of older releases still
readable until rotated."""

import base64
import hashlib
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from infrastructure.security.keys import secret_keys
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


def test_a_generated_key_is_kept_for_the_next_start_readable_by_its_owner_only(tmp_path: Path) -> None:
    [key] = secret_keys([], tmp_path)
    assert secret_keys([], tmp_path) == [key]
    assert stat.S_IMODE((tmp_path / "secret.key").stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["secret.key"]


def test_processes_starting_side_by_side_all_take_the_key_the_first_one_generated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process generated the key after this one looked for it: this one takes that key, not its own."""
    [first] = secret_keys([], tmp_path)
    monkeypatch.setattr(Path, "exists", lambda self: False)  # it looked before the other process's key was there
    assert secret_keys([], tmp_path) == [first]
    assert [p.name for p in tmp_path.iterdir()] == ["secret.key"]
