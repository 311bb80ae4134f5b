"""The OpenAI adapter with the real SDK, against a fake Chat Completions server over HTTP."""

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Sequence

import pytest

from application.errors import ModelRequestRejected, ModelUnavailable
from application.ports.llm import ModelRequest, ModelToolCall, ToolDefinition
from domain.agents import ModelSettings
from domain.messages import ImageContent, ToolResultContent, ToolUseContent
from domain.usage import Usage
from infrastructure.llm import OpenAiLanguageModel
from tests.builders import assistant, tool_results, user
from tests.fakes.openai_server import ErrorReply, FakeOpenAI, FakeToolCall, TextReply, ToolCallsReply

API_KEY = "sk-test-never-show-me-0123456789"
RETRIES = 2
LONG_MESSAGE = "a message long enough to arrive in several fragments"
ECHO = ToolDefinition(
    name="everything__echo",
    description="Echo a message",
    parameters={"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def model(fake: FakeOpenAI) -> AsyncIterator[OpenAiLanguageModel]:
    adapter = OpenAiLanguageModel(api_key=API_KEY, base_url=fake.base_url, timeout_seconds=5, max_retries=RETRIES)
    yield adapter
    await adapter.aclose()


def ask(text: str = "What is the capital of France?", tools: Sequence[ToolDefinition] = ()) -> ModelRequest:
    return ModelRequest(model="gpt-test", instructions="", messages=[user(text)], tools=tools)


class Deltas:
    def __init__(self) -> None:
        self.received: list[str] = []
        self.first = asyncio.Event()

    async def __call__(self, delta: str) -> None:
        self.received.append(delta)
        self.first.set()


async def test_a_text_answer_comes_back_with_usage_finish_reason_and_model(
    fake: FakeOpenAI, model: OpenAiLanguageModel
) -> None:
    fake.reply_text("Paris.", prompt_tokens=14, completion_tokens=2)

    response = await model.complete(ask())

    assert response.text == "Paris."
    assert response.tool_calls == ()
    assert response.usage == Usage(input_tokens=14, output_tokens=2)
    assert response.finish_reason == "stop"
    assert response.model == "gpt-test"


async def test_a_tool_call_comes_back_with_parsed_arguments(fake: FakeOpenAI, model: OpenAiLanguageModel) -> None:
    fake.reply_tool_calls(FakeToolCall("everything__echo", {"message": "hi"}, id="call_abc"))

    response = await model.complete(ask("Echo hi", tools=[ECHO]))

    assert response.tool_calls == (ModelToolCall(id="call_abc", name="everything__echo", arguments={"message": "hi"}),)
    assert response.finish_reason == "tool_calls"


async def test_several_tool_calls_keep_their_order_and_bad_arguments_are_reported(
    fake: FakeOpenAI, model: OpenAiLanguageModel
) -> None:
    fake.reply_tool_calls(
        FakeToolCall("everything__echo", {"message": "one"}),
        FakeToolCall("everything__echo", '{"message": "two"'),
        FakeToolCall("everything__echo", '["three"]'),
    )

    response = await model.complete(ask("Echo three times", tools=[ECHO]))

    first, second, third = response.tool_calls
    assert (first.arguments, first.arguments_error) == ({"message": "one"}, None)
    assert second.arguments == {}
    assert second.arguments_error is not None
    assert "everything__echo" in second.arguments_error
    assert "not valid JSON" in second.arguments_error
    assert third.arguments == {}
    assert third.arguments_error == "the arguments for everything__echo must be a JSON object, not an array"
    assert len({first.id, second.id, third.id}) == 3


async def test_streamed_text_reaches_the_listener_in_order_and_the_response_matches_the_plain_one(
    fake: FakeOpenAI, model: OpenAiLanguageModel
) -> None:
    answer = "The capital of France is Paris, on the Seine."
    fake.script(TextReply(answer), TextReply(answer))
    deltas = Deltas()

    plain = await model.complete(ask())
    streamed = await model.complete(ask(), deltas)

    assert len(deltas.received) > 1
    assert "".join(deltas.received) == answer
    assert streamed == plain
    assert streamed.usage.total_tokens > 0
    assert fake.requests[1]["stream"] is True
    assert fake.requests[1]["stream_options"] == {"include_usage": True}
    assert "stream" not in fake.requests[0] or fake.requests[0]["stream"] is False


async def test_streamed_tool_calls_are_assembled_from_their_fragments(
    fake: FakeOpenAI, model: OpenAiLanguageModel
) -> None:
    calls = ToolCallsReply(
        [
            FakeToolCall("everything__echo", {"message": LONG_MESSAGE}, id="call_1"),
            FakeToolCall("everything__echo", "{not json", id="call_2"),
        ],
        text="Calling twice.",
    )
    fake.script(calls, calls)
    deltas = Deltas()

    plain = await model.complete(ask(tools=[ECHO]))
    streamed = await model.complete(ask(tools=[ECHO]), deltas)

    assert streamed == plain
    assert "".join(deltas.received) == "Calling twice."
    assert streamed.tool_calls[0].arguments == {"message": LONG_MESSAGE}
    assert streamed.tool_calls[1].arguments_error is not None
    assert streamed.finish_reason == "tool_calls"


async def test_the_conversation_reaches_the_provider_in_chat_completions_form(
    fake: FakeOpenAI, model: OpenAiLanguageModel
) -> None:
    fake.reply_text("Done.")
    conversation = [
        user("Look at this", ImageContent(url="https://example.com/cat.png")),
        assistant("Echoing.", ToolUseContent(id="call_1", name="everything__echo", params={"message": "hi"})),
        tool_results(ToolResultContent(tool_use_id="call_1", tool_name="everything__echo", result="hi")),
        user(ImageContent(data="iVBORw0KGgo=", mime_type="image/png")),
    ]

    await model.complete(
        ModelRequest(
            model="gpt-test",
            instructions="You are terse.",
            messages=conversation,
            tools=[ECHO],
            settings=ModelSettings(temperature=0.2, max_tokens=50, seed=7),
            parallel_tool_calls=False,
        )
    )

    (sent,) = fake.requests
    assert sent["model"] == "gpt-test"
    assert sent["messages"] == [
        {"role": "system", "content": "You are terse."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look at this"},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Echoing.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "everything__echo", "arguments": '{"message": "hi"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "hi"},
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}],
        },
    ]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {"name": ECHO.name, "description": ECHO.description, "parameters": ECHO.parameters},
        }
    ]
    assert sent["parallel_tool_calls"] is False
    assert (sent["temperature"], sent["max_tokens"], sent["seed"]) == (0.2, 50, 7)
    assert "top_p" not in sent
    assert "presence_penalty" not in sent


async def test_without_tools_no_tool_fields_are_sent(fake: FakeOpenAI, model: OpenAiLanguageModel) -> None:
    fake.reply_text("Hi.")

    await model.complete(ask("Hello"))

    (sent,) = fake.requests
    assert "tools" not in sent
    assert "parallel_tool_calls" not in sent
    assert [m["role"] for m in sent["messages"]] == ["user"]


@pytest.mark.parametrize("status", [500, 503, 429])
async def test_a_provider_that_keeps_failing_is_unavailable_after_the_retries(
    fake: FakeOpenAI, model: OpenAiLanguageModel, status: int
) -> None:
    failure = ErrorReply(status, "The server had an error while processing your request")
    fake.script(*[failure] * (RETRIES + 1))

    with pytest.raises(ModelUnavailable) as raised:
        await model.complete(ask())

    assert len(fake.requests) == RETRIES + 1
    assert str(raised.value) == (
        f"model provider returned {status} after {RETRIES + 1} attempts:"
        " The server had an error while processing your request"
    )
    assert raised.value.code == "model_unavailable"


async def test_a_provider_that_recovers_within_the_retries_answers(
    fake: FakeOpenAI, model: OpenAiLanguageModel
) -> None:
    fake.script(ErrorReply(502), TextReply("Recovered."))

    response = await model.complete(ask())

    assert response.text == "Recovered."
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "This model's maximum context length is 8192 tokens."),
        (401, f"Incorrect API key provided: {API_KEY}. You can find your API key at the dashboard."),
        (404, "The model `gpt-test` does not exist or you do not have access to it."),
    ],
)
async def test_a_refused_request_is_rejected_at_once_without_showing_the_key(
    fake: FakeOpenAI, model: OpenAiLanguageModel, status: int, message: str
) -> None:
    fake.reply_error(status, message)

    with pytest.raises(ModelRequestRejected) as raised:
        await model.complete(ask())

    assert len(fake.requests) == 1
    assert str(raised.value).startswith(f"model provider returned {status} after 1 attempt: ")
    assert message.split(":")[0] in str(raised.value)
    assert API_KEY not in str(raised.value)
    assert API_KEY not in repr(raised.value.__cause__)
    assert raised.value.code == "model_request_rejected"


async def test_a_reply_slower_than_the_timeout_makes_the_model_unavailable_in_time(fake: FakeOpenAI) -> None:
    held = fake.hold()
    adapter = OpenAiLanguageModel(api_key=API_KEY, base_url=fake.base_url, timeout_seconds=0.3, max_retries=0)
    started = time.monotonic()

    with pytest.raises(ModelUnavailable) as raised:
        await adapter.complete(ask())

    elapsed = time.monotonic() - started
    await adapter.aclose()
    assert 0.25 <= elapsed < 2
    assert str(raised.value) == "model provider did not answer within 0.3 s after 1 attempt"
    await held.abandoned.wait()


async def test_an_unreachable_provider_is_unavailable_without_showing_the_key() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    adapter = OpenAiLanguageModel(api_key=API_KEY, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)

    with pytest.raises(ModelUnavailable) as raised:
        await adapter.complete(ask())

    await adapter.aclose()
    assert str(raised.value).startswith(
        f"could not reach the model provider at http://127.0.0.1:{port} after 1 attempt"
    )
    assert API_KEY not in str(raised.value)


async def test_a_stream_that_stalls_past_the_timeout_makes_the_model_unavailable(fake: FakeOpenAI) -> None:
    held = fake.hold(first_text="Started, then nothing")
    adapter = OpenAiLanguageModel(api_key=API_KEY, base_url=fake.base_url, timeout_seconds=0.3, max_retries=0)
    deltas = Deltas()

    with pytest.raises(ModelUnavailable) as raised:
        await adapter.complete(ask(), deltas)

    await adapter.aclose()
    await held.abandoned.wait()
    assert "".join(deltas.received).startswith("Started")
    assert str(raised.value) == "model provider did not answer within 0.3 s after 1 attempt"


async def test_cancelling_a_streamed_call_hangs_up_on_the_provider(
    fake: FakeOpenAI, model: OpenAiLanguageModel
) -> None:
    held = fake.hold(first_text="Thinking about it")
    deltas = Deltas()
    call = asyncio.create_task(model.complete(ask(), deltas))

    await deltas.first.wait()
    call.cancel()

    with pytest.raises(asyncio.CancelledError):
        await call
    await held.abandoned.wait()
    assert "".join(deltas.received).startswith("Thinking")


async def test_an_error_in_the_middle_of_a_stream_makes_the_model_unavailable(
    fake: FakeOpenAI, model: OpenAiLanguageModel
) -> None:
    held = fake.hold(first_text="Partial answer")
    deltas = Deltas()
    call = asyncio.create_task(model.complete(ask(), deltas))

    await deltas.first.wait()
    held.release(ErrorReply(500, "The model crashed"))

    with pytest.raises(ModelUnavailable) as raised:
        await call
    assert str(raised.value) == "model provider failed while answering: The model crashed"


async def test_a_held_reply_answers_once_released(fake: FakeOpenAI, model: OpenAiLanguageModel) -> None:
    held = fake.hold()
    call = asyncio.create_task(model.complete(ask()))

    await held.received.wait()
    assert not call.done()
    held.release(TextReply("Finally."))

    assert (await call).text == "Finally."
