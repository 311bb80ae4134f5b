import pytest

from application.caller import Caller
from application.errors import InvalidCursor, PermissionDenied
from application.pagination import decode_id_cursor, decode_position_cursor, encode_cursor, page_of
from domain.api_keys import Role
from infrastructure.security.api_keys import Sha256KeyHasher
from infrastructure.system import Uuid7Generator


def test_cursors_round_trip_and_refuse_forgeries() -> None:
    assert decode_position_cursor(encode_cursor("41")) == 41
    with pytest.raises(InvalidCursor):
        decode_position_cursor("not-base64!")
    with pytest.raises(InvalidCursor):
        decode_id_cursor(encode_cursor("not-a-uuid"))


def test_a_page_has_a_cursor_only_when_more_rows_exist() -> None:
    assert page_of([1, 2, 3], 2, key=str).next_cursor is not None
    assert page_of([1, 2], 2, key=str).next_cursor is None


def test_uuid7_ids_increase_within_a_process() -> None:
    ids = Uuid7Generator()
    made = [ids.new() for _ in range(10_000)]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert all(i.version == 7 for i in made[:10])


def test_minted_keys_verify_and_others_do_not() -> None:
    hasher = Sha256KeyHasher()
    minted = hasher.mint()
    assert hasher.prefix_of(minted.plaintext) == minted.prefix
    assert hasher.verify(minted.plaintext, minted.secret_hash)
    assert not hasher.verify(minted.plaintext[:-1] + "x", minted.secret_hash)
    assert minted.plaintext not in minted.secret_hash
    assert hasher.prefix_of("tl_short") is None


def test_members_are_refused_admin_actions() -> None:
    from uuid import uuid4

    from domain.ids import OrgId

    with pytest.raises(PermissionDenied, match="only admins may rotate"):
        Caller(org_id=OrgId(uuid4()), role=Role.MEMBER).require_admin("rotate")
