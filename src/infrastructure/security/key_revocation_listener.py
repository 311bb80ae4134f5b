"""Listens for API key revocations (see key_revocations.py): on PostgreSQL only."""

import logging
from uuid import UUID

from domain.ids import ApiKeyId, OrgId
from infrastructure.execution.pg_listener import ChannelListener
from infrastructure.security.key_revocations import CHANNEL
from infrastructure.security.verified_keys import VerifiedKeyCache

logger = logging.getLogger(__name__)


class KeyRevocationListener(ChannelListener):
    """Verified keys are kept only while this process listens (`trust`), and none while it does not."""

    def __init__(self, keys: VerifiedKeyCache) -> None:
        super().__init__(channel=CHANNEL, what="API key revocations")
        self._keys = keys

    def listening(self) -> None:
        self._keys.trust()  # revocations committed from now on reach this process

    def not_listening(self) -> None:
        self._keys.distrust()  # whatever ended the listening, revocations may go unseen now

    async def received(self, payload: str, pid: int) -> None:
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
