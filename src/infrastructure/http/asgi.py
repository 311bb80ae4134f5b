"""Small pieces the ASGI middlewares share."""

from starlette.types import Message, Send


class TrackedSend:
    """Sends as `send` does, remembering whether the response has begun: after that, no error answer can be
    sent any more, only the connection closed."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)
