"""One PostgreSQL LISTEN channel, on a connection of its own that is kept open: lost, it is opened again (with
a growing pause between attempts) for as long as the process runs. Subclasses say what a notice does, and what
the process must do while notices may be going unseen."""

import asyncio
import contextlib
import logging
from typing import Any

import psycopg

from infrastructure.execution.pg_event_bus import RECONNECT_SECONDS, libpq_dsn

logger = logging.getLogger(__name__)


class ChannelListener:
    def __init__(self, database_url: str, *, channel: str, what: str) -> None:
        """`what` names the notices in log lines ("API key revocations")."""
        self._dsn, self._channel, self._what = libpq_dsn(database_url), channel, what
        self._listening: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Returns once this process listens (notices committed from then on reach it), or once it failed to
        connect: it keeps trying in the background, and the process starts all the same."""
        try:
            listener: psycopg.AsyncConnection[Any] | None = await self._connected()
        except psycopg.OperationalError:
            logger.warning("%s of other processes cannot be received yet; retrying", self._what)
            listener = None
        self._listening = asyncio.create_task(self._listen(listener), name=f"{self._channel}-listener")

    async def close(self) -> None:
        if self._listening is not None:
            self._listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listening

    async def received(self, payload: str) -> None:
        """A notice on the channel."""
        raise NotImplementedError

    def listening(self) -> None:
        """Notices committed from now on reach this process."""

    def not_listening(self) -> None:
        """The connection ended: notices may go unseen until it is back."""

    async def listening_again(self) -> None:
        """Listening again after the connection was lost: what was sent meanwhile is unknown."""

    async def _connected(self) -> psycopg.AsyncConnection[Any]:
        listener = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        try:
            await listener.execute(f"LISTEN {self._channel}")
        except BaseException:
            await listener.close()
            raise
        self.listening()
        return listener

    async def _listen(self, listener: psycopg.AsyncConnection[Any] | None) -> None:
        failures = 0
        while True:
            if listener is not None:
                try:
                    async with listener:
                        failures = 0
                        async for notification in listener.notifies():
                            await self.received(notification.payload)
                except psycopg.Error:  # whatever ended the listening (a lost connection, a protocol error...)
                    logger.warning("the connection that receives %s was lost; reconnecting", self._what)
                finally:
                    self.not_listening()
            listener = await self._reconnect(failures)
            failures += 1
            await self.listening_again()

    async def _reconnect(self, failures: int) -> psycopg.AsyncConnection[Any]:
        while True:
            await asyncio.sleep(RECONNECT_SECONDS[min(failures, len(RECONNECT_SECONDS) - 1)])
            try:
                return await self._connected()
            except psycopg.OperationalError:
                failures += 1
