"""API key revocations across the processes of a deployment, through PostgreSQL's LISTEN/NOTIFY.

Revoking a key sends `key <id>` on CHANNEL in the revoking transaction (the notice leaves at commit); deleting
an organization would send `organization <id>`. Every process listens and forgets the key (or the
organization's keys) among its verified keys at once. While this connection is down, notices may be lost: the
process then keeps no verified keys at all, and reads every key from the database until it listens again.
"""

import asyncio
import contextlib
import logging
from typing import Any
from uuid import UUID

import psycopg

from domain.ids import ApiKeyId, OrgId
from infrastructure.execution.pg_event_bus import RECONNECT_SECONDS, libpq_dsn
from infrastructure.security.verified_keys import VerifiedKeyCache

logger = logging.getLogger(__name__)

CHANNEL = "threadline_api_keys"


def revoked_notice(key_id: ApiKeyId) -> str:
    return f"key {key_id}"


class KeyRevocationListener:
    def __init__(self, database_url: str, keys: VerifiedKeyCache) -> None:
        self._dsn = libpq_dsn(database_url)
        self._keys = keys
        self._listening: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Returns once this process listens, or once it failed to connect: it keeps trying in the background
        (and reads every key from the database meanwhile)."""
        try:
            listener: psycopg.AsyncConnection[Any] | None = await self._connected()
        except psycopg.OperationalError:
            logger.warning("API key revocations of other processes cannot be received yet; retrying")
            listener = None
        self._listening = asyncio.create_task(self._listen(listener), name="key-revocations-listener")

    async def close(self) -> None:
        self._keys.distrust()
        if self._listening is not None:
            self._listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listening

    async def _connected(self) -> psycopg.AsyncConnection[Any]:
        listener = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        try:
            await listener.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            await listener.close()
            raise
        self._keys.trust()  # revocations committed from now on reach this process
        return listener

    async def _listen(self, listener: psycopg.AsyncConnection[Any] | None) -> None:
        failures = 0
        while True:
            if listener is not None:
                try:
                    async with listener:
                        failures = 0
                        async for notification in listener.notifies():
                            self._received(notification.payload)
                except psycopg.Error:
                    logger.warning("the connection that receives API key revocations was lost; reconnecting")
                finally:
                    self._keys.distrust()  # whatever ended the listening, revocations may go unseen now
            listener = await self._reconnect(failures)
            failures += 1

    async def _reconnect(self, failures: int) -> psycopg.AsyncConnection[Any]:
        while True:
            await asyncio.sleep(RECONNECT_SECONDS[min(failures, len(RECONNECT_SECONDS) - 1)])
            try:
                return await self._connected()
            except psycopg.OperationalError:
                failures += 1

    def _received(self, payload: str) -> None:
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
