"""Run events across the processes of a deployment, through PostgreSQL's LISTEN/NOTIFY.

Each process publishes with NOTIFY on one connection of its own and listens on its listening connection (shared
with the process's other channels: pg_listener.py). Its own events reach
its followers at once, through the in-memory bus; events of other processes arrive through the listener and
join the same in-memory bus, so a follower does not care where a run executes. NOTIFY payloads are limited
to 8,000 bytes: a bigger event is sent in pieces that the listener puts back together. Notifications of one
connection arrive in the order they were sent, and each process publishes a run's events one after the
other, so the events one process publishes of a run arrive in order. Those of two processes may not: the API
process that stores a run publishes its first events after the commit that lets a worker take it, so a worker's
first events could come before them if the API process stalled right after that commit (a follower that gets
an event skipping over seqs reads the skipped ones from storage: they were stored before they were published).
Publishing does not wait for the database: notifications queue in the process and one sender sends all that are
waiting in one statement (one round trip for many events when runs execute side by side), in the order they were
published. While the listening connection is down, notifications are lost: once it is back, the stored events of
the runs this process's followers follow are read again, so none of those is missed (text deltas sent meanwhile
are; the message they built is stored).

A follower that reads a run's history from storage may find there an event stored after text deltas (which are
never stored) whose notifications have not reached this process yet: they would come after the history, and be
dropped as old. So a process sends what it published before it commits what it stores next (`sent`, awaited by
the run's event stream), and a follower whose history has gaps waits for a fence (`received_all`): a
notification this process sends itself, which its listener receives after every notification committed before
it, the deltas of that stored event included.
"""

import asyncio
import contextlib
import json
import logging
import uuid
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from application.ports.execution import RunSubscription
from domain.ids import RunId
from domain.run_events import RunEvent, RunEventType
from infrastructure.execution.event_bus import InMemoryRunEventBus
from infrastructure.execution.pg_listener import ChannelListener, Notices, libpq_dsn
from infrastructure.run_event_json import event_data, event_payload

logger = logging.getLogger(__name__)

CHANNEL = "threadline_run_events"
PIECE_CHARS = 1_800
"""Characters of an event's JSON per notification: at most 4 bytes each in UTF-8, within the 8,000-byte limit."""
BATCH_NOTIFICATIONS = 64
"""Notifications sent in one statement at most."""
FLUSH_SECONDS = 5.0
"""How long `sent` waits at most (also on close, for the notifications still waiting to go out)."""
FENCE = "!"
"""What starts a fence's notification (an event's starts with its key, hex digits)."""
FENCE_SECONDS = 2.0
"""How long `received_all` waits for its fence at most (the listening connection may be down)."""


def encode(event: RunEvent) -> list[str]:
    """The notifications that carry one event: `<key> <index> <count> <piece of its JSON>`."""
    text = json.dumps(
        {
            "run_id": str(event.run_id),
            "seq": event.seq,
            "type": event.type.value,
            "created_at": event.created_at.isoformat(),
            "data": event_data(event.payload),
        },
        separators=(",", ":"),
    )
    pieces = [text[i : i + PIECE_CHARS] for i in range(0, len(text), PIECE_CHARS)] or [""]
    key = uuid.uuid4().hex
    return [f"{key} {index} {len(pieces)} {piece}" for index, piece in enumerate(pieces)]


def decode(text: str) -> RunEvent:
    raw: dict[str, Any] = json.loads(text)
    event_type = RunEventType(raw["type"])
    return RunEvent(
        run_id=RunId(UUID(raw["run_id"])),
        seq=raw["seq"],
        payload=event_payload(event_type, raw["data"]),
        created_at=datetime.fromisoformat(raw["created_at"]),
    )


_STORED_AFTER = (
    "SELECT seq, type, data, created_at FROM run_events WHERE run_id = %(run_id)s AND seq > %(seen)s ORDER BY seq"
)


class _Assembly:
    """Puts events sent in pieces back together, per sending connection."""

    def __init__(self) -> None:
        self._pieces: dict[tuple[int, str], list[str]] = {}

    def add(self, pid: int, notification: str) -> str | None:
        key, index, count, piece = notification.split(" ", 3)
        if count == "1":
            return piece
        pieces = self._pieces.setdefault((pid, key), [])
        pieces.append(piece)
        if int(index) + 1 < int(count):
            return None
        del self._pieces[(pid, key)]
        return "".join(pieces)


class PostgresRunEventBus(ChannelListener):
    def __init__(self, database_url: str, *, listening: bool = True, notices: Notices | None = None) -> None:
        """`listening` False: this process serves no followers (a worker): it only sends, and what subscribes here
        hears nothing (a run waiting for its user's answer reads it from storage: an answer to a question asked
        while its tool call is open is not announced). It listens on the process's listening connection
        (`notices`), or on one of its own."""
        super().__init__(channel=CHANNEL, what="run events of other processes")
        self._dsn = libpq_dsn(database_url)
        self._listens = listening
        self._own_notices = notices is None
        self._notices = notices if notices is not None else Notices(database_url)
        self._connected = False
        """Whether the listening connection is up (a fence is not waited for while it is down)."""
        self._closed = False
        self._local = InMemoryRunEventBus()
        self._assembly = _Assembly()
        self._publisher: psycopg.AsyncConnection[Any] | None = None
        self._publishing = asyncio.Lock()
        self._outbox: list[str] = []
        self._waiting = asyncio.Event()
        self._sending: asyncio.Task[None] | None = None
        self._queued = self._sent = 0
        """Notifications published, and of them those sent (or given up on), since the process started."""
        self._sent_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._fences: dict[str, asyncio.Future[None]] = {}

    async def start(self) -> None:
        """Returns once this process listens (unless it was made not `listening`): events published from then on
        reach its followers; or, when the database cannot be reached, once the listening connection is retried in
        the background (what the followers missed meanwhile is read from storage once it is back)."""
        if self._listens:
            await self._notices.listen(self)

    async def close(self) -> None:
        self._closed = True
        if self._listens:
            if self._own_notices:
                await self._notices.close()
            self._connected = False
            for heard in self._fences.values():  # nothing more is heard: the fences' followers go on
                if not heard.done():
                    heard.set_result(None)
        if self._sending is not None:
            await self.sent()  # what was published goes out before the process ends (FLUSH_SECONDS at most)
            self._sending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sending
            self._count_sent(self._queued - self._sent)  # nothing more will be: none waits for it
        if self._publisher is not None:
            await self._publisher.close()

    async def publish(self, event: RunEvent) -> None:
        if self._listens:  # (a process that does not listen has no followers to give it to)
            self._local.deliver(event)  # this process's followers need no round trip
        if event.type is RunEventType.CREATED:
            # Stored with the run, before any other process could know of the run: their followers read it from
            # storage. Not sent, it wakes no listening connection of the database.
            return
        notifications = encode(event)
        self._outbox.extend(notifications)
        self._queued += len(notifications)
        if self._sending is None or self._sending.done():  # (started again should it ever have died)
            self._sending = asyncio.create_task(self._send(), name="run-events-sender")
        self._waiting.set()

    async def _send(self) -> None:
        """Send the waiting notifications, many per statement, in the order they were published."""
        while True:
            await self._waiting.wait()
            self._waiting.clear()
            while self._outbox:
                batch = self._outbox[:BATCH_NOTIFICATIONS]
                del self._outbox[:BATCH_NOTIFICATIONS]
                await self._notify(batch)
                self._count_sent(len(batch))

    def _count_sent(self, notifications: int) -> None:
        self._sent += notifications
        while self._sent_waiters and self._sent_waiters[0][0] <= self._sent:
            _, waiter = self._sent_waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)

    async def sent(self) -> None:
        target = self._queued
        if self._sent >= target:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._sent_waiters.append((target, waiter))
        try:
            async with asyncio.timeout(FLUSH_SECONDS):
                await waiter
        except TimeoutError:  # the sender is stuck (the database is gone?): what follows fails or goes on
            logger.warning("run event notifications were not sent within %.0f s", FLUSH_SECONDS)

    async def received_all(self) -> None:
        if not self._connected:  # not listening, or not now (what it missed is read from storage once back)
            return
        key = uuid.uuid4().hex
        heard = self._fences[key] = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(FENCE_SECONDS):
                await self._notify([FENCE + key])
                await heard
        except TimeoutError:  # not listening now: what it missed is read from storage once it is back
            logger.warning("this process did not hear its own fence within %.0f s", FENCE_SECONDS)
        finally:
            del self._fences[key]

    async def _notify(self, batch: list[str]) -> None:
        statement = "SELECT " + ", ".join(["pg_notify(%s, %s)"] * len(batch))
        params = [value for notification in batch for value in (CHANNEL, notification)]
        for attempt in range(2):
            try:
                async with self._publishing:
                    publisher = await self._connected_publisher()
                    await publisher.execute(statement, params)  # type: ignore[arg-type]
                return
            except psycopg.Error:
                if self._publisher is not None:
                    with contextlib.suppress(psycopg.Error):
                        await self._publisher.close()
                if attempt:  # followers in other processes do not hear of these events live
                    logger.warning("run event notifications could not be sent", exc_info=True)

    def subscribe(self, run_id: RunId) -> contextlib.AbstractAsyncContextManager[RunSubscription]:
        return self._local.subscribe(run_id)

    async def _connected_publisher(self) -> psycopg.AsyncConnection[Any]:
        if self._publisher is None or self._publisher.closed:
            self._publisher = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        return self._publisher

    def listening(self) -> None:
        self._connected = not self._closed

    def not_listening(self) -> None:
        self._connected = False

    async def listening_again(self) -> None:
        await self._catch_up()  # (the listening connection's log line says it listens again)

    async def received(self, payload: str, pid: int) -> None:
        if not self._closed:
            self._received(pid, payload)

    async def _catch_up(self) -> None:
        """Deliver the stored events of followed runs that were published while no one listened (read on the
        publishing connection: the listening one hands out only what arrives while it is read)."""
        try:
            async with self._publishing:
                connection = await self._connected_publisher()
                for run_id, seen in self._local.followed().items():
                    cursor = await connection.execute(_STORED_AFTER, {"run_id": run_id, "seen": seen})
                    for seq, event_type, data, created_at in await cursor.fetchall():
                        payload = event_payload(RunEventType(event_type), data)  # jsonb: read as a dict
                        event = RunEvent(run_id=run_id, seq=seq, payload=payload, created_at=created_at)
                        self._local.deliver(event)
        except (psycopg.Error, ValueError, KeyError, TypeError):
            logger.warning("the run events stored while no one listened could not be read", exc_info=True)

    def _received(self, pid: int, notification: str) -> None:
        if notification.startswith(FENCE):  # ours (what came before it has been received), or another's
            heard = self._fences.get(notification[len(FENCE) :])
            if heard is not None and not heard.done():
                heard.set_result(None)
            return
        if self._publisher is not None and pid == self._publisher.info.backend_pid:
            return  # our own event: delivered when published
        try:
            text = self._assembly.add(pid, notification)
            if text is not None:
                self._local.deliver(decode(text))
        except (ValueError, KeyError, TypeError):
            logger.warning("a run event notification could not be read", exc_info=True)
