"""The language model port on OpenAI's Chat Completions API (or any server that speaks it)."""

import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
from openai import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
    DefaultAsyncHttpx2Client,
    OpenAIError,
)
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall

from application.errors import ModelError, ModelRequestRejected, ModelUnavailable
from application.ports.llm import ModelRequest, ModelResponse, ModelToolCall, TextListener
from domain.usage import Usage
from infrastructure.llm.openai_messages import chat_messages, chat_tools
from infrastructure.llm.tool_arguments import parse_tool_arguments

_DETAIL_MAX = 500
# Statuses the SDK retries by itself: once they reach us, the provider kept failing.
_TRANSIENT_STATUSES = frozenset({408, 409, 429})


class _PooledTransport(httpx2.AsyncBaseTransport):
    """The requests spread over POOLS connection pools, in turn, with CONNECTIONS in all (as the SDK's default
    pool), each kept alive once open (for KEEP_ALIVE_SECONDS unused).

    A pool looks at each of its connections whenever a request starts or ends. With a thousand model calls at
    once, one pool of a thousand connections spent more CPU on that than on the calls, and closed all but a
    hundred of them between a run's two calls, to open them again."""

    POOLS = 8
    CONNECTIONS = 1_000
    KEEP_ALIVE_SECONDS = 5.0

    def __init__(self) -> None:
        per_pool = -(-self.CONNECTIONS // self.POOLS)
        limits = httpx2.Limits(
            max_connections=per_pool, max_keepalive_connections=per_pool, keepalive_expiry=self.KEEP_ALIVE_SECONDS
        )
        self._pools = [httpx2.AsyncHTTPTransport(limits=limits) for _ in range(self.POOLS)]
        self._next = itertools.cycle(self._pools)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await next(self._next).handle_async_request(request)

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


class OpenAiLanguageModel:
    """Calls an OpenAI-compatible Chat Completions endpoint; the SDK retries transient failures and
    what is left is raised as ModelUnavailable or ModelRequestRejected."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout_seconds: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        if not api_key:
            raise ValueError("an OpenAI API key is required")
        self._api_key = api_key
        self._timeout_seconds = timeout_seconds
        self._client = AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_seconds,
            max_retries=max_retries,
            http_client=DefaultAsyncHttpx2Client(timeout=timeout_seconds, transport=_PooledTransport()),
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(self, request: ModelRequest, on_text: TextListener | None = None) -> ModelResponse:
        params = _request_params(request)
        try:
            if on_text is None:
                completion = await self._client.chat.completions.create(**params, stream=False)
                return _response_of(completion)
            return await self._stream(params, on_text)
        except APIStatusError as error:
            raise self._status_error(error) from None
        except APITimeoutError as error:
            raise ModelUnavailable(
                f"model provider did not answer within {self._timeout_seconds:g} s {attempts_of(error.request)}"
            ) from None
        except APIConnectionError as error:
            url = error.request.url
            cause = self._redact(str(error.__cause__ or error.message))
            raise ModelUnavailable(
                f"could not reach the model provider at {url.scheme}://{url.netloc.decode()}"
                f" {attempts_of(error.request)}: {cause}"
            ) from None
        except APIError as error:
            raise ModelUnavailable(
                f"model provider failed while answering: {self._redact(provider_detail(error))}"
            ) from None
        except OpenAIError as error:
            raise ModelError(f"model call failed: {self._redact(str(error))}") from None

    async def _stream(self, params: dict[str, Any], on_text: TextListener) -> ModelResponse:
        """The SDK sends the request (retries, status errors); the chunks are read here, as the plain JSON they are.
        (The SDK would build a typed object of each chunk, many per answer: most of a streamed call's cost.)"""
        answer = _StreamedAnswer()
        create = self._client.chat.completions.with_streaming_response.create
        async with create(**params, stream=True, stream_options={"include_usage": True}) as response:
            request = response.http_request
            try:
                async for data in _sse_data(response.http_response.aiter_lines()):
                    if data.startswith("[DONE]"):
                        continue  # read to the end, so that the connection is reused
                    piece = answer.add(_chunk(data, request))
                    if piece:
                        await on_text(piece)
            except httpx2.TimeoutException as error:
                raise APITimeoutError(request=request) from error
            except httpx2.RequestError as error:
                raise APIConnectionError(request=request) from error
        return answer.response()

    def _status_error(self, error: APIStatusError) -> ModelError:
        status = error.status_code
        message = (
            f"model provider returned {status} {attempts_of(error.response.request)}:"
            f" {self._redact(provider_detail(error))}"
        )
        if status >= 500 or status in _TRANSIENT_STATUSES:
            return ModelUnavailable(message)
        return ModelRequestRejected(message)

    def _redact(self, text: str) -> str:
        """Providers may echo the credentials they refused; the key must not reach runs or logs."""
        return text.replace(self._api_key, "[redacted]")


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class _StreamedAnswer:
    """An answer put together from its stream's chunks (Chat Completions chunk objects, as JSON)."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str = ""

    def add(self, chunk: dict[str, Any]) -> str:
        """Takes in a chunk; returns its text, if any."""
        self.model = chunk.get("model") or self.model
        if usage := chunk.get("usage"):
            details = usage.get("prompt_tokens_details") or {}
            self.usage = Usage(
                input_tokens=usage.get("prompt_tokens") or 0,
                output_tokens=usage.get("completion_tokens") or 0,
                cached_tokens=details.get("cached_tokens") or 0,
            )
        pieces = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
            delta = choice.get("delta") or {}
            piece = delta.get("content") or delta.get("refusal")
            if piece:
                self.text.append(piece)
                pieces.append(piece)
            for call in delta.get("tool_calls") or ():
                partial = self.calls.setdefault(call.get("index", 0), _PartialCall())
                partial.id = partial.id or call.get("id") or ""
                function = call.get("function") or {}
                partial.name += function.get("name") or ""
                partial.arguments += function.get("arguments") or ""
        return "".join(pieces)

    def response(self) -> ModelResponse:
        tool_calls = [
            _tool_call(partial.id or f"call_{index}", partial.name, partial.arguments)
            for index, partial in sorted(self.calls.items())
        ]
        return ModelResponse(
            text="".join(self.text),
            tool_calls=tuple(tool_calls),
            usage=self.usage,
            finish_reason=self.finish_reason,
            model=self.model,
        )


async def _sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The data of each server-sent event (its `data:` lines joined); other fields and comments are skipped."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
    if data:
        yield "\n".join(data)


def _chunk(data: str, request: httpx2.Request) -> dict[str, Any]:
    """A chunk; an error event is raised as the SDK raises it."""
    try:
        chunk = json.loads(data)
    except ValueError:
        raise APIError(message="the provider streamed a chunk that is not JSON", request=request, body=data) from None
    if not isinstance(chunk, dict):
        raise APIError(message="the provider streamed a chunk that is not an object", request=request, body=chunk)
    if error := chunk.get("error"):
        message = error.get("message") if isinstance(error, dict) else None
        if not message or not isinstance(message, str):
            message = "An error occurred during streaming"
        raise APIError(message=message, request=request, body=error)
    return chunk


def _request_params(request: ModelRequest) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": chat_messages(request.instructions, request.messages)}
    if request.tools:
        body["tools"] = chat_tools(request.tools)
        body["parallel_tool_calls"] = request.parallel_tool_calls
    # The conversation and the tool schemas are plain JSON already. Given as typed parameters, the SDK
    # walks them against its TypedDicts (several milliseconds a call with a dozen tool schemas); as
    # extra_body they go out as they are. The body is the same.
    return {"model": request.model, "messages": [], **request.settings.as_dict(), "extra_body": body}


def _response_of(completion: ChatCompletion) -> ModelResponse:
    if not completion.choices:
        raise ModelUnavailable("model provider returned an answer without choices")
    choice = completion.choices[0]
    message = choice.message
    tool_calls = []
    for call in message.tool_calls or ():
        if isinstance(call, ChatCompletionMessageFunctionToolCall):
            tool_calls.append(_tool_call(call.id, call.function.name, call.function.arguments))
        else:
            tool_calls.append(
                ModelToolCall(
                    id=call.id,
                    name=call.custom.name,
                    arguments={},
                    arguments_error=f"{call.custom.name} was called as a custom tool, not as a function",
                )
            )
    return ModelResponse(
        text=message.content or message.refusal or "",
        tool_calls=tuple(tool_calls),
        usage=_usage_of(completion.usage) if completion.usage is not None else Usage(),
        finish_reason=choice.finish_reason,
        model=completion.model,
    )


def _tool_call(call_id: str, name: str, raw_arguments: str) -> ModelToolCall:
    arguments, error = parse_tool_arguments(name, raw_arguments)
    return ModelToolCall(id=call_id, name=name, arguments=arguments, arguments_error=error)


def _usage_of(usage: CompletionUsage) -> Usage:
    details = usage.prompt_tokens_details
    cached = details.cached_tokens if details is not None else None
    return Usage(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens, cached_tokens=cached or 0)


def attempts_of(request: httpx2.Request) -> str:
    # The SDK numbers its retries in this header; the last request tells how many attempts were made.
    try:
        count = int(request.headers.get("x-stainless-retry-count", "0")) + 1
    except ValueError:
        count = 1
    return "after 1 attempt" if count == 1 else f"after {count} attempts"


def provider_detail(error: APIError) -> str:
    body = error.body
    detail: object = None
    if isinstance(body, dict):
        detail = body.get("message")
    elif isinstance(body, str):
        detail = body
    if not isinstance(detail, str) or not detail.strip():
        detail = error.message
    text = " ".join(str(detail).split())
    return text if len(text) <= _DETAIL_MAX else text[:_DETAIL_MAX] + "..."
