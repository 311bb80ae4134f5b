"""What a process hears through PostgreSQL's LISTEN, on one connection of its own for all its channels (run events
of other processes, MCP catalog changes, API key revocations), kept open: lost, it is opened again (with a growing
pause between attempts) for as long as the process runs.

One connection, not one per channel: every notification committed in the database wakes each of its listening
connections' server processes, whichever channel they listen to (PostgreSQL reads the queue in each of them to
find out), and a run sends several. Each listener the deployment opens costs the database that, for every
notification of every run.

A channel's listener (ChannelListener) says what a notice does, and what the process must do while notices may go
unseen. The connection listens once a listener is added: its first listener connects it (or, failing that, it
keeps trying in the background while the process starts all the same)."""

import asyncio
import contextlib
import logging
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

logger = logging.getLogger(__name__)

RECONNECT_SECONDS = (0.0, 0.1, 0.5, 1.0, 2.0, 5.0)
"""The pauses before the attempts to connect again, the last one repeated."""


def libpq_dsn(database_url: str) -> str:
    """The connection string libpq (psycopg) takes for a SQLAlchemy URL such as `postgresql+asyncpg://u@h/db`."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


class ChannelListener:
    """What one channel's notices do."""

    def __init__(self, *, channel: str, what: str) -> None:
        """`what` names the notices in log lines ("API key revocations")."""
        self.channel, self.what = channel, what

    async def received(self, payload: str, pid: int) -> None:
        """A notice on the channel, sent by the server process `pid`."""
        raise NotImplementedError

    def listening(self) -> None:
        """Notices committed from now on reach this process."""

    def not_listening(self) -> None:
        """The connection ended: notices may go unseen until it is back."""

    async def listening_again(self) -> None:
        """Listening again after the connection was lost: what was sent meanwhile is unknown."""


class Notices:
    """The process's listening connection, and the listeners of its channels."""

    def __init__(self, database_url: str) -> None:
        self._dsn = libpq_dsn(database_url)
        self._listeners: dict[str, ChannelListener] = {}
        self._connection: psycopg.AsyncConnection[Any] | None = None
        self._listening: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        """Set while the listening task waits (for a notice, or to connect again): stopped there, it loses nothing."""
        self._changing = asyncio.Lock()

    async def listen(self, listener: ChannelListener) -> None:
        """Returns once the listener's notices committed from then on reach it (its `listening` was called), or
        once connecting failed: the connection keeps trying in the background."""
        async with self._changing:
            await self._stop_listening()  # (the connection is not read while its channels change)
            self._listeners[listener.channel] = listener
            try:
                if self._connection is None or self._connection.closed:  # the first, or the connection was lost
                    self._connection = None
                    self._connection = await self._connected()
                    for each in self._listeners.values():
                        each.listening()
                    for each in self._listeners.values():
                        if each is not listener:
                            await self._caught_up(each)
                else:  # (listening to the others all along: their notices wait in the connection meanwhile)
                    await self._connection.execute(self._statement())
                    listener.listening()
            except psycopg.Error:
                logger.warning("%s of other processes cannot be received yet; retrying", listener.what)
                if self._connection is not None:
                    await self._connection.close()
                    self._connection = None
                    for each in self._listeners.values():
                        each.not_listening()
            self._listening = asyncio.create_task(self._listen(self._connection), name="notices-listener")

    async def close(self) -> None:
        async with self._changing:
            await self._stop_listening()
            if self._connection is not None:
                await self._connection.close()
                self._connection = None

    async def _stop_listening(self) -> None:
        """Once the listening task waits: a notice it handles, or a catch-up after a lost connection, goes to its
        end first."""
        if self._listening is None:
            return
        if not self._listening.done():
            await self._idle.wait()
            self._listening.cancel()
        await asyncio.wait([self._listening])
        self._listening = None

    def _statement(self) -> str:
        """LISTEN to every channel, in one statement (which pg_stat_activity shows as the connection's query)."""
        return "; ".join(f"LISTEN {channel}" for channel in self._listeners)

    async def _connected(self) -> psycopg.AsyncConnection[Any]:
        connection = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        try:
            await connection.execute(self._statement())
        except BaseException:
            await connection.close()
            raise
        return connection

    async def _listen(self, connection: psycopg.AsyncConnection[Any] | None) -> None:
        failures = 0
        while True:
            if connection is not None:
                failures = 0
                try:
                    self._idle.set()
                    async for notification in connection.notifies():
                        self._idle.clear()
                        await self._received(notification)
                        self._idle.set()
                except psycopg.Error:  # whatever ended the listening (a lost connection, a protocol error...)
                    pass
                self._idle.clear()
                logger.warning("the connection that receives %s was lost; reconnecting", self._what())
                with contextlib.suppress(psycopg.Error):
                    await connection.close()
                for listener in list(self._listeners.values()):
                    listener.not_listening()
            self._idle.set()
            connection = self._connection = await self._reconnect(failures)
            self._idle.clear()
            failures += 1
            for listener in list(self._listeners.values()):
                listener.listening()
            for listener in list(self._listeners.values()):
                await self._caught_up(listener)

    @staticmethod
    async def _caught_up(listener: ChannelListener) -> None:
        try:
            await listener.listening_again()
        except Exception:  # one channel's failure does not end the listening of the others
            logger.exception("%s sent while the connection was down could not be caught up", listener.what)

    async def _received(self, notification: psycopg.Notify) -> None:
        listener = self._listeners.get(notification.channel)
        if listener is None:
            return
        try:
            await listener.received(notification.payload, notification.pid)
        except Exception:  # one channel's failure does not end the listening of the others
            logger.exception("a notice of %s could not be handled", listener.what)

    def _what(self) -> str:
        return ", ".join(listener.what for listener in self._listeners.values())

    async def _reconnect(self, failures: int) -> psycopg.AsyncConnection[Any]:
        while True:
            await asyncio.sleep(RECONNECT_SECONDS[min(failures, len(RECONNECT_SECONDS) - 1)])
            try:
                connection = await self._connected()
            except psycopg.OperationalError:
                failures += 1
                continue
            logger.info("receiving %s again", self._what())
            return connection
