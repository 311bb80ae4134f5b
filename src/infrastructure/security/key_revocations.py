"""API key revocations across the processes of a deployment, through PostgreSQL's LISTEN/NOTIFY.

Revoking a key sends `key <id>` on CHANNEL in the revoking transaction (the notice leaves at commit); deleting
an organization would send `organization <id>`. Every process listens and forgets the key (or the
organization's keys) among its verified keys at once. While this connection is down, notices may be lost: the
process then keeps no verified keys at all, and reads every key from the database until it listens again.
"""

import logging
from uuid import UUID

from domain.ids import ApiKeyId, OrgId
from infrastructure.execution.pg_listener import ChannelListener
from infrastructure.security.verified_keys import VerifiedKeyCache

logger = logging.getLogger(__name__)

CHANNEL = "threadline_api_keys"


def revoked_notice(key_id: ApiKeyId) -> str:
    return f"key {key_id}"


class KeyRevocationListener(ChannelListener):
    """Verified keys are kept only while this process listens (`trust`), and none while it does not."""

    def __init__(self, database_url: str, keys: VerifiedKeyCache) -> None:
        super().__init__(database_url, channel=CHANNEL, what="API key revocations")
        self._keys = keys

    async def close(self) -> None:
        self._keys.distrust()
        await super().close()

    def listening(self) -> None:
        self._keys.trust()  # revocations committed from now on reach this process

    def not_listening(self) -> None:
        self._keys.distrust()  # whatever ended the listening, revocations may go unseen now

    async def received(self, payload: str) -> None:
        kind, _, value = payload.partition(" ")
        try:
            if kind == "key":
                self._keys.forget_key(ApiKeyId(UUID(value)))
            elif kind == "organization":
                self._keys.forget_organization(OrgId(UUID(value)))
            else:
                raise ValueError(kind)
        except ValueError:
            logger.warning("an API key revocation notice could not be read: %r", payload)
            self._keys.distrust()  # which keys it meant is unknown: trust none kept so far
            self._keys.trust()
