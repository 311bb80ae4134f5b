"""API key revocations across the processes of a deployment, through PostgreSQL's LISTEN/NOTIFY.

Revoking a key sends `key <id>` on CHANNEL in the revoking transaction (the notice leaves at commit); deleting
an organization would send `organization <id>`. Every process listens and forgets the key (or the
organization's keys) among its verified keys at once. While this connection is down, notices may be lost: the
process then keeps no verified keys at all, and reads every key from the database until it listens again.

Here: the channel and its notices, as the transactions that revoke send them; the listener is in
key_revocation_listener.py (with psycopg, which a server on SQLite does without).
"""

from domain.ids import ApiKeyId

CHANNEL = "threadline_api_keys"


def revoked_notice(key_id: ApiKeyId) -> str:
    return f"key {key_id}"
