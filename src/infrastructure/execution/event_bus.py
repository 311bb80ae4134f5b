"""Run events inside one process: a short backlog per run (so a late follower sees the whole run,
text deltas included) and a queue per follower."""

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from domain.ids import RunId
from domain.run_events import RunEvent

BACKLOG_EVENTS = 2_000
KEEP_AFTER_END_SECONDS = 120.0


@dataclass
class _Channel:
    backlog: deque[RunEvent] = field(default_factory=lambda: deque(maxlen=BACKLOG_EVENTS))
    followers: list[asyncio.Queue[RunEvent]] = field(default_factory=list)
    ended_at: float | None = None
    ended_seq: int = 0
    """The seq of the event that ended the run's stream last."""


@dataclass
class _Subscription:
    backlog: list[RunEvent]
    queue: asyncio.Queue[RunEvent] = field(default_factory=asyncio.Queue)

    async def next(self) -> RunEvent:
        return await self.queue.get()

    def received(self) -> list[RunEvent]:
        taken = []
        while not self.queue.empty():
            taken.append(self.queue.get_nowait())
        return taken


class InMemoryRunEventBus:
    def __init__(self) -> None:
        self._channels: dict[RunId, _Channel] = {}
        self._ended: deque[tuple[float, RunId]] = deque()

    async def publish(self, event: RunEvent) -> None:
        self.deliver(event)

    async def sent(self) -> None:
        """Nothing leaves this process: a published event is delivered at once."""

    async def received_all(self) -> None:
        """No other process sends here."""

    def deliver(self, event: RunEvent) -> None:
        """Hand an event to the run's followers and backlog (without waiting: nothing here does)."""
        channel = self._channels.setdefault(event.run_id, _Channel())
        channel.backlog.append(event)
        if event.type.ends_stream:
            channel.ended_at, channel.ended_seq = time.monotonic(), event.seq
            self._ended.append((channel.ended_at, event.run_id))
        elif event.seq > channel.ended_seq:  # the run went on; an earlier event arriving late (from another
            channel.ended_at = None  # process: the API's first ones after a worker's) changes nothing
        for follower in channel.followers:
            follower.put_nowait(event)
        self._forget_ended()

    def followed(self) -> dict[RunId, int]:
        """The runs someone follows, each with the highest seq this bus has of it (0: none)."""
        return {
            run_id: max((e.seq for e in channel.backlog), default=0)
            for run_id, channel in self._channels.items()
            if channel.followers
        }

    @contextlib.asynccontextmanager
    async def subscribe(self, run_id: RunId) -> AsyncIterator[_Subscription]:
        channel = self._channels.setdefault(run_id, _Channel())
        subscription = _Subscription(backlog=list(channel.backlog))
        channel.followers.append(subscription.queue)
        try:
            yield subscription
        finally:
            channel.followers.remove(subscription.queue)
            if not channel.followers and not channel.backlog:
                self._channels.pop(run_id, None)

    def _forget_ended(self) -> None:
        """Drop the backlog of runs that ended a while ago (oldest first; a run that went on is kept)."""
        horizon = time.monotonic() - KEEP_AFTER_END_SECONDS
        while self._ended and self._ended[0][0] < horizon:
            ended_at, run_id = self._ended.popleft()
            channel = self._channels.get(run_id)
            if channel is not None and channel.ended_at == ended_at and not channel.followers:
                del self._channels[run_id]
