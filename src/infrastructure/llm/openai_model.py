"""The language model port on OpenAI's Chat Completions API (or any server that speaks it)."""

from dataclasses import dataclass
from typing import Any

import httpx2
from openai import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
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
        self._client = AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout_seconds, max_retries=max_retries)

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
        text: list[str] = []
        calls: dict[int, _PartialCall] = {}
        usage = Usage()
        finish_reason: str | None = None
        model = ""
        stream = await self._client.chat.completions.create(
            **params, stream=True, stream_options={"include_usage": True}
        )
        async with stream:
            async for chunk in stream:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = _usage_of(chunk.usage)
                for choice in chunk.choices:
                    if choice.index != 0:
                        continue
                    finish_reason = choice.finish_reason or finish_reason
                    piece = choice.delta.content or choice.delta.refusal
                    if piece:
                        text.append(piece)
                        await on_text(piece)
                    for delta in choice.delta.tool_calls or ():
                        partial = calls.setdefault(delta.index, _PartialCall())
                        partial.id = partial.id or delta.id or ""
                        if delta.function is not None:
                            partial.name += delta.function.name or ""
                            partial.arguments += delta.function.arguments or ""
        tool_calls = [
            _tool_call(partial.id or f"call_{index}", partial.name, partial.arguments)
            for index, partial in sorted(calls.items())
        ]
        return ModelResponse(
            text="".join(text),
            tool_calls=tuple(tool_calls),
            usage=usage,
            finish_reason=finish_reason,
            model=model,
        )

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
