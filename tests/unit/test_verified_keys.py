"""The verified API keys a process keeps: bounded, short-lived, and forgotten at once when revoked."""

from pathlib import Path

from domain.api_keys import ApiKey
from infrastructure.security.verified_keys import VerifiedKeyCache, revocation_stamp
from tests import builders


class Ticking:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def a_key() -> ApiKey:
    return builders.api_key(builders.organization().id)


def test_a_key_is_kept_for_its_time_only() -> None:
    clock = Ticking()
    keys = VerifiedKeyCache(ttl_seconds=30, trusted=True, monotonic=clock)
    key = a_key()
    keys.remember("secret", key, as_of=keys.version())
    clock.now = 29.9
    assert keys.get("secret") is key and keys.get("another secret") is None
    clock.now = 30
    assert keys.get("secret") is None and len(keys) == 0


def test_a_read_that_raced_a_revocation_is_not_kept() -> None:
    keys = VerifiedKeyCache(ttl_seconds=30, trusted=True)
    key = a_key()
    as_of = keys.version()  # the key is read...
    keys.forget_key(key.id)  # ...while it is revoked
    keys.remember("secret", key, as_of=as_of)
    assert keys.get("secret") is None


def test_forgetting_a_key_or_an_organization_drops_only_theirs() -> None:
    keys = VerifiedKeyCache(ttl_seconds=30, trusted=True)
    first, second, third = a_key(), a_key(), a_key()
    for secret, key in (("one", first), ("two", second), ("three", third)):
        keys.remember(secret, key, as_of=keys.version())
    keys.forget_key(first.id)
    keys.forget_organization(second.org_id)
    assert (keys.get("one"), keys.get("two"), keys.get("three")) == (None, None, third)


def test_at_most_so_many_keys_are_kept_the_least_recently_used_leave_first() -> None:
    keys = VerifiedKeyCache(ttl_seconds=30, trusted=True, max_keys=2)
    first, second, third = a_key(), a_key(), a_key()
    keys.remember("one", first, as_of=keys.version())
    keys.remember("two", second, as_of=keys.version())
    assert keys.get("one") is first
    keys.remember("three", third, as_of=keys.version())
    assert len(keys) == 2 and keys.get("two") is None and keys.get("one") is first


def test_nothing_is_kept_or_answered_while_revocations_may_go_unseen() -> None:
    keys = VerifiedKeyCache(ttl_seconds=30)  # not trusted until revocations reach it
    key = a_key()
    keys.remember("secret", key, as_of=keys.version())
    assert keys.get("secret") is None
    keys.trust()
    as_of = keys.version()
    keys.remember("secret", key, as_of=as_of)
    keys.distrust()  # the revocation notices were lost
    assert keys.get("secret") is None
    keys.trust()
    assert keys.get("secret") is None  # what was kept before is gone
    keys.remember("secret", key, as_of=as_of)  # a read begun before
    assert keys.get("secret") is None


def test_a_cache_time_of_zero_keeps_nothing() -> None:
    keys = VerifiedKeyCache(ttl_seconds=0, trusted=True)
    keys.remember("secret", a_key(), as_of=keys.version())
    assert len(keys) == 0


def test_a_key_revoked_by_another_process_of_a_sqlite_database_is_forgotten_at_the_next_lookup(
    tmp_path: Path,
) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'threadline.db'}"
    here = VerifiedKeyCache(ttl_seconds=30, trusted=True, stamp=revocation_stamp(database))
    command_line = VerifiedKeyCache(ttl_seconds=30, stamp=revocation_stamp(database))  # `threadline keys revoke`
    kept, other = a_key(), a_key()
    here.remember("secret", kept, as_of=here.version())
    here.remember("other secret", other, as_of=here.version())
    assert here.get("secret") is kept

    command_line.forget_key(kept.id)  # after its commit
    assert here.get("secret") is None  # and every other key is read again once
    assert here.get("other secret") is None
    here.remember("other secret", other, as_of=here.version())
    assert here.get("other secret") is other  # until the next revocation

    command_line.forget_key(a_key().id)
    assert here.get("other secret") is None


def test_a_database_in_memory_or_on_postgresql_has_no_revocation_file() -> None:
    assert revocation_stamp("sqlite+aiosqlite:///:memory:") is None
    assert revocation_stamp("sqlite+aiosqlite://") is None
    assert revocation_stamp("postgresql+asyncpg://postgres@127.0.0.1/test") is None
