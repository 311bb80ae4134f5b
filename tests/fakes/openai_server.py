"""A fake OpenAI Chat Completions server over real HTTP, for tests and benchmarks.

In a test::

    async with FakeOpenAI() as fake:
        fake.reply_tool_calls(FakeToolCall("everything__echo", {"message": "hi"}))
        fake.reply_text("All done.")
        model = OpenAiLanguageModel(api_key="sk-test", base_url=fake.base_url)
        ...
        assert fake.requests[1]["messages"][-1]["role"] == "tool"

A slow provider, without sleeping in the test::

    held = fake.hold()                      # the next request waits...
    call = asyncio.create_task(model.complete(request))
    await held.received.wait()              # ...it has arrived
    held.release(TextReply("Finally."))     # or cancel `call` and `await held.abandoned.wait()`

Scripted replies are served first in, first out; when none is left, `responder(body)` answers (a
function of the request body, sync or async); with neither, the server answers 500 and says so.

As a process (for benchmarks)::

    python -m tests.fakes.openai_server --port 0 --latency-ms 1000 --script tool-then-text \\
        --tool-name everything__echo --tool-args '{"message": "hi"}'

prints `listening on http://127.0.0.1:PORT/v1` once it accepts connections.
"""

import argparse
import asyncio
import contextlib
import inspect
import itertools
import json
import signal
import socket
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive

_ARGUMENT_FRAGMENT = 12


@dataclass(frozen=True)
class FakeToolCall:
    """A tool call in a reply. `arguments` given as a string is sent as is (e.g. invalid JSON)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    """Defaults to `call_<request number>_<position>`."""


@dataclass(frozen=True)
class TextReply:
    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    """Token counts default to word counts of the request and the reply."""
    cached_tokens: int | None = None
    """Reported as `prompt_tokens_details.cached_tokens` when set."""
    finish_reason: str = "stop"


@dataclass(frozen=True)
class ToolCallsReply:
    calls: Sequence[FakeToolCall]
    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error in OpenAI's error format. After a streamed `HeldReply.first_text`, it is sent as
    an SSE error event instead."""

    status: int
    message: str = "fake provider error"
    retry_after_ms: int | None = 1
    """Sent as `retry-after-ms`, which the SDK honours: 1 ms keeps retry tests fast."""
    should_retry: bool | None = None
    """Sent as `x-should-retry` when set; it overrides the SDK's choice by status."""


class HeldReply:
    """A reply that waits until the test calls `release(reply)` or the client gives up.

    `received` is set when the request arrives, `abandoned` when the client disconnects before the
    release (a timeout or a cancelled call). With `first_text`, a streamed answer sends that text
    before it waits, and the released reply's text follows it.
    """

    def __init__(self, first_text: str = "") -> None:
        self.first_text = first_text
        self.received = asyncio.Event()
        self.abandoned = asyncio.Event()
        self._released = asyncio.Event()
        self._reply: FinalReply = TextReply("released")

    def release(self, reply: "FinalReply | None" = None) -> None:
        """Let the request go on with `reply` (by default the text "released")."""
        if reply is not None:
            self._reply = reply
        self._released.set()

    async def _wait(self, receive: Receive) -> "FinalReply | None":
        """The released reply, or None when the client went away first."""
        released = asyncio.ensure_future(self._released.wait())
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({released, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            self.abandoned.set()
            raise
        finally:
            released.cancel()
            gone.cancel()
        if self._released.is_set():
            return self._reply
        self.abandoned.set()
        return None


FinalReply = TextReply | ToolCallsReply | ErrorReply
Reply = FinalReply | HeldReply
Responder = Callable[[dict[str, Any]], Reply | Awaitable[Reply]]


class FakeOpenAI:
    """An OpenAI-compatible `POST /v1/chat/completions` on 127.0.0.1, run on the current event loop.

    Non-streaming answers are `chat.completion` objects; with `"stream": true` the answer is SSE
    `chat.completion.chunk` events (role, content word by word, tool calls with their arguments in
    fragments, finish reason, then a usage chunk when `stream_options.include_usage` is set) and
    `data: [DONE]`.
    """

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        latency_ms: float = 0,
        port: int = 0,
        model: str | None = None,
        record_requests: bool = True,
    ) -> None:
        self.responder = responder
        self.latency_ms = latency_ms
        self.model = model
        """The model named in answers; by default the one the request asked for."""
        self.requests: list[dict[str, Any]] = []
        """The JSON bodies received, in order."""
        self._record = record_requests
        self._port = port
        self._script: deque[Reply] = deque()
        self._held: list[HeldReply] = []
        self._numbers = itertools.count(1)
        self._server: _InProcessServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None

    @property
    def base_url(self) -> str:
        if self._socket is None:
            raise RuntimeError("FakeOpenAI is not started")
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}/v1"

    def reset(self) -> None:
        """Forget the requests and the scripted replies left, for a server shared by several tests."""
        self.requests.clear()
        self._script.clear()

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order."""
        self._script.extend(replies)

    def reply_text(self, text: str, *, prompt_tokens: int | None = None, completion_tokens: int | None = None) -> None:
        self.script(TextReply(text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens))

    def reply_tool_calls(self, *calls: FakeToolCall, text: str = "") -> None:
        self.script(ToolCallsReply(calls, text=text))

    def reply_error(self, status: int, message: str = "fake provider error", **options: Any) -> None:
        self.script(ErrorReply(status, message, **options))

    def hold(self, first_text: str = "") -> HeldReply:
        held = HeldReply(first_text)
        self.script(held)
        return held

    async def start(self) -> None:
        # Naming IPPROTO_TCP makes asyncio set TCP_NODELAY on accepted connections; without it every
        # answer stalls ~40 ms (Nagle against delayed ACKs between the header and body writes).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._port))
        sock.listen(4096)
        sock.setblocking(False)
        self._socket = sock
        config = uvicorn.Config(
            self._app(),
            lifespan="off",
            log_level="warning",
            access_log=False,
            backlog=4096,
            timeout_keep_alive=30,
            timeout_graceful_shutdown=2,
        )
        self._server = _InProcessServer(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        ready = asyncio.ensure_future(self._server.ready.wait())
        await asyncio.wait({ready, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            ready.cancel()
            await self._task
            raise RuntimeError("FakeOpenAI did not start")

    async def stop(self) -> None:
        for held in self._held:
            if not held._released.is_set():
                held.release(ErrorReply(503, "FakeOpenAI stopped", retry_after_ms=None, should_retry=False))
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
        self._server = self._task = None

    async def __aenter__(self) -> "FakeOpenAI":
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    def _app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self._chat_completions, methods=["POST"])])

    async def _chat_completions(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error_response(ErrorReply(400, "the request body is not JSON", retry_after_ms=None))
        if not isinstance(body, dict):
            return _error_response(ErrorReply(400, "the request body must be an object", retry_after_ms=None))
        number = next(self._numbers)
        if self._record:
            self.requests.append(body)
        if self.latency_ms:
            await asyncio.sleep(self.latency_ms / 1000)
        reply = await self._next_reply(body)
        answer = _Answer(body=body, number=number, model=self.model or str(body.get("model", "")))
        streaming = bool(body.get("stream"))
        if isinstance(reply, HeldReply):
            self._held.append(reply)
            reply.received.set()
            if streaming and reply.first_text:
                return answer.stream(reply, request.receive)
            released = await reply._wait(request.receive)
            if released is None:
                return Response(status_code=499)
            reply = released
        if isinstance(reply, ErrorReply):
            return _error_response(reply)
        if streaming:
            return answer.stream(reply, request.receive)
        return JSONResponse(answer.completion(reply))

    async def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self._script:
            return self._script.popleft()
        if self.responder is not None:
            reply = self.responder(body)
            return await reply if inspect.isawaitable(reply) else reply
        return ErrorReply(
            500,
            "FakeOpenAI has no scripted reply left and no responder",
            retry_after_ms=None,
            should_retry=False,
        )


class _InProcessServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The server shares the test's (or benchmark's) process: Ctrl-C must stay theirs.
        yield


@dataclass(frozen=True)
class _Answer:
    """The answer to one request, as a completion object or as stream chunks."""

    body: dict[str, Any]
    number: int
    model: str

    @property
    def id(self) -> str:
        return f"chatcmpl-fake-{self.number}"

    def completion(self, reply: TextReply | ToolCallsReply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
        calls = self._calls(reply)
        if calls:
            message["tool_calls"] = calls
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(reply)}],
            "usage": self._usage(reply),
        }

    def stream(self, reply: Reply, receive: Receive) -> StreamingResponse:
        return StreamingResponse(self._events(reply, receive), media_type="text/event-stream")

    async def _events(self, reply: Reply, receive: Receive) -> AsyncIterator[str]:
        include_usage = bool((self.body.get("stream_options") or {}).get("include_usage"))
        yield self._chunk({"role": "assistant", "content": ""}, include_usage=include_usage)
        prefix = ""
        if isinstance(reply, HeldReply):
            prefix = reply.first_text
            for word in _words(prefix):
                yield self._chunk({"content": word}, include_usage=include_usage)
            released = await reply._wait(receive)
            if released is None:
                return
            reply = released
        if isinstance(reply, ErrorReply):
            yield _sse({"error": _error_body(reply)})
            return
        for word in _words(reply.text):
            yield self._chunk({"content": word}, include_usage=include_usage)
        for index, call in enumerate(self._calls(reply)):
            function = call["function"]
            yield self._chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": function["name"], "arguments": ""},
                        }
                    ]
                },
                include_usage=include_usage,
            )
            arguments = function["arguments"]
            for start in range(0, len(arguments), _ARGUMENT_FRAGMENT):
                fragment = arguments[start : start + _ARGUMENT_FRAGMENT]
                yield self._chunk(
                    {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]},
                    include_usage=include_usage,
                )
        yield self._chunk({}, include_usage=include_usage, finish_reason=_finish_reason(reply))
        if include_usage:
            yield _sse({**self._chunk_envelope(), "choices": [], "usage": self._usage(reply, prefix)})
        yield "data: [DONE]\n\n"

    def _chunk(self, delta: dict[str, Any], *, include_usage: bool, finish_reason: str | None = None) -> str:
        chunk = {
            **self._chunk_envelope(),
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if include_usage:
            chunk["usage"] = None
        return _sse(chunk)

    def _chunk_envelope(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "system_fingerprint": None,
        }

    def _calls(self, reply: TextReply | ToolCallsReply) -> list[dict[str, Any]]:
        if not isinstance(reply, ToolCallsReply):
            return []
        return [
            {
                "id": call.id or f"call_{self.number}_{position}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(dict(call.arguments)),
                },
            }
            for position, call in enumerate(reply.calls, start=1)
        ]

    def _usage(self, reply: TextReply | ToolCallsReply, prefix: str = "") -> dict[str, Any]:
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt = sum(_word_count(m.get("content")) for m in self.body.get("messages") or ())
        completion = reply.completion_tokens
        if completion is None:
            completion = len((prefix + reply.text).split()) + sum(
                len(call["function"]["arguments"].split()) for call in self._calls(reply)
            )
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if reply.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
        return usage


def _finish_reason(reply: TextReply | ToolCallsReply) -> str:
    return reply.finish_reason if isinstance(reply, TextReply) else "tool_calls"


def _error_response(reply: ErrorReply) -> JSONResponse:
    headers = {}
    if reply.retry_after_ms is not None:
        headers["retry-after-ms"] = str(reply.retry_after_ms)
    if reply.should_retry is not None:
        headers["x-should-retry"] = "true" if reply.should_retry else "false"
    return JSONResponse({"error": _error_body(reply)}, status_code=reply.status, headers=headers)


def _error_body(reply: ErrorReply) -> dict[str, Any]:
    kind = "server_error" if reply.status >= 500 else "invalid_request_error"
    return {"message": reply.message, "type": kind, "param": None, "code": None}


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"


def _words(text: str) -> list[str]:
    """The text in word-sized deltas that join back into exactly the text."""
    pieces: list[str] = []
    for piece in text.split(" "):
        if pieces:
            pieces[-1] += " "
        pieces.append(piece)
    return [piece for piece in pieces if piece]


def _word_count(content: object) -> int:
    if isinstance(content, str):
        return len(content.split())
    if isinstance(content, list):
        return sum(len(str(part.get("text", "")).split()) for part in content if isinstance(part, dict))
    return 0


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def tool_then_text(tool_name: str, tool_args: Mapping[str, Any]) -> Responder:
    """Calls the tool until the conversation holds a tool result, then answers with text."""

    def respond(body: dict[str, Any]) -> Reply:
        results = [m for m in body.get("messages") or () if m.get("role") == "tool"]
        if not results:
            return ToolCallsReply([FakeToolCall(tool_name, tool_args)])
        return TextReply(f"{tool_name} returned: {str(results[-1].get('content'))[:200]}")

    return respond


def echo_text(body: dict[str, Any]) -> Reply:
    """Answers with the latest user text."""
    users = [m for m in body.get("messages") or () if m.get("role") == "user"]
    return TextReply(f"You said: {users[-1].get('content')}" if users else "Hello.")


async def _serve(args: argparse.Namespace) -> None:
    responder: Responder = echo_text
    if args.script == "tool-then-text":
        responder = tool_then_text(args.tool_name, json.loads(args.tool_args))
    fake = FakeOpenAI(responder=responder, latency_ms=args.latency_ms, port=args.port, record_requests=False)
    await fake.start()
    print(f"listening on {fake.base_url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await fake.stop()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A fake OpenAI Chat Completions server")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0, help="delay before every answer")
    parser.add_argument("--script", choices=["text", "tool-then-text"], default="text")
    parser.add_argument("--tool-name", default="echo", help="the tool tool-then-text calls")
    parser.add_argument("--tool-args", default="{}", help="its arguments, a JSON object")
    args = parser.parse_args(argv)
    if args.script == "tool-then-text" and not isinstance(json.loads(args.tool_args), dict):
        parser.error("--tool-args must be a JSON object")
    asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
