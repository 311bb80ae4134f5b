"""Serve an ASGI app with uvicorn on 127.0.0.1, in this event loop.

The listening socket is bound before uvicorn starts, so clients can connect at once: their
connections wait in the socket's backlog until the server accepts them. Nobody polls for readiness.
"""

import asyncio
import socket
from types import TracebackType
from typing import Literal

import uvicorn
from starlette.types import ASGIApp


class LoopbackServer:
    def __init__(self, app: ASGIApp, *, lifespan: Literal["auto", "on", "off"] = "auto") -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(1024)
        self.port: int = self._socket.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan))
        self._task: asyncio.Task[None] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> "LoopbackServer":
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.should_exit = True
        if self._server.force_exit:
            # Python 3.12's asyncio Server.wait_closed waits for every connection to end: a client's open
            # stream (an MCP session listening for notifications) would hold the shutdown forever.
            for connection in list(self._server.server_state.connections):
                transport = getattr(connection, "transport", None)
                if transport is not None:
                    transport.close()
        if self._task is not None:
            await self._task
        self._socket.close()
