"""The HTTP server of `threadline serve`: uvicorn, telling open event streams when it is asked to stop."""

import asyncio
import socket
from types import FrameType

import uvicorn

from infrastructure.heap import settle_heap


class StoppingServer(uvicorn.Server):
    """On SIGTERM or SIGINT, sets the application's `state.stopping`: event streams end at once (their clients
    reconnect with Last-Event-ID) instead of holding the process until their runs end. Requests still in
    flight after the config's `timeout_graceful_shutdown` are cancelled. Once started, it freezes the heap (see
    `infrastructure.heap`)."""

    def __init__(self, config: uvicorn.Config, stopping: asyncio.Event) -> None:
        super().__init__(config)
        self._stopping = stopping
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        settle_heap()  # the application has started: what it holds now lives as long as the process

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
