from collections.abc import Sequence

import pytest

from application.errors import ModelNotConfigured
from application.ports.llm import ModelRequest, ModelResponse, ModelToolCall, TextListener, ToolDefinition
from domain.messages import Message, ToolResultContent, ToolUseContent
from infrastructure.llm import ModelRouter, OfflineLanguageModel
from tests.builders import assistant, tool_results, user

ECHO = ToolDefinition(
    name="everything__echo",
    description="Echo a message",
    parameters={"type": "object", "properties": {"message": {"type": "string"}}},
)
CLOCK = ToolDefinition(name="clock", description="The time", parameters={"type": "object"})


def request(
    messages: Sequence[Message], *, tools: Sequence[ToolDefinition] = (ECHO, CLOCK), instructions: str = ""
) -> ModelRequest:
    return ModelRequest(model="threadline-offline", instructions=instructions, messages=messages, tools=tools)


async def complete(model_request: ModelRequest) -> ModelResponse:
    return await OfflineLanguageModel().complete(model_request)


async def test_call_lines_in_the_newest_user_message_become_tool_calls() -> None:
    response = await complete(request([user('Please run these:\ncall everything__echo {"message": "hi"}\ncall clock')]))

    assert response.tool_calls == (
        ModelToolCall(id="call_1", name="everything__echo", arguments={"message": "hi"}),
        ModelToolCall(id="call_2", name="clock", arguments={}),
    )
    assert response.text == ""
    assert response.finish_reason == "tool_calls"
    assert response.model == "threadline-offline"


async def test_call_ids_continue_after_the_calls_already_in_the_thread() -> None:
    earlier = [
        user("call clock"),
        assistant(ToolUseContent(id="call_1", name="clock")),
        tool_results(ToolResultContent(tool_use_id="call_1", tool_name="clock", result="noon")),
        assistant("clock returned: noon"),
    ]

    response = await complete(request([*earlier, user("call clock")]))

    assert [call.id for call in response.tool_calls] == ["call_2"]


async def test_arguments_that_are_not_a_json_object_give_an_arguments_error() -> None:
    response = await complete(request([user("call everything__echo {not json\ncall clock [1, 2]")]))

    first, second = response.tool_calls
    assert first.arguments == {}
    assert first.arguments_error is not None
    assert "not valid JSON" in first.arguments_error
    assert second.arguments == {}
    assert second.arguments_error == "the arguments for clock must be a JSON object, not an array"


async def test_an_unknown_tool_gets_an_answer_listing_the_available_tools() -> None:
    response = await complete(request([user("call clock\ncall weather {}")]))

    assert response.tool_calls == ()
    assert response.text == ("I cannot call weather: there is no such tool. Available tools: everything__echo, clock.")
    assert response.finish_reason == "stop"


async def test_without_tools_the_answer_says_so() -> None:
    response = await complete(request([user("call clock")], tools=()))

    assert response.tool_calls == ()
    assert "none (this agent has no tools)" in response.text


async def test_tool_results_are_summarised_one_line_each_and_long_ones_shortened() -> None:
    conversation = [
        user("call everything__echo {}\ncall clock"),
        assistant(ToolUseContent(id="call_1", name="everything__echo"), ToolUseContent(id="call_2", name="clock")),
        tool_results(
            ToolResultContent(tool_use_id="call_1", tool_name="everything__echo", result="x" * 600),
            ToolResultContent(tool_use_id="call_2", tool_name="clock", result="no clock here", is_error=True),
        ),
    ]

    response = await complete(request(conversation))

    assert response.text.splitlines() == [
        f"everything__echo returned: {'x' * 500} [... 100 more characters]",
        "clock failed: no clock here",
    ]
    assert response.tool_calls == ()


async def test_otherwise_it_quotes_the_user_counts_messages_and_quotes_the_instructions() -> None:
    conversation = [user("Hello"), assistant("Hi!"), user("What can  you\ndo?")]

    response = await complete(request(conversation, instructions="\nYou are a pirate.\nSay arr."))

    assert response.text == (
        'You said: "What can you do?". This thread has 3 messages. My instructions begin: "You are a pirate.".'
    )
    assert response.finish_reason == "stop"


async def test_the_same_conversation_always_gets_the_same_answer() -> None:
    conversation = [user("Tell me something")]

    first = await complete(request(conversation, instructions="Be kind."))
    second = await complete(request(conversation, instructions="Be kind."))

    assert first == second


async def test_streaming_delivers_the_answer_in_word_groups_and_returns_the_same_response() -> None:
    model_request = request([user("Hello there, how are you today?")], instructions="Answer politely.")
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    streamed = await OfflineLanguageModel().complete(model_request, on_text)

    assert len(deltas) > 3
    assert "".join(deltas) == streamed.text
    assert all(len(delta.split()) <= 3 for delta in deltas)
    assert streamed == await complete(model_request)


async def test_usage_counts_words_of_the_conversation_and_of_the_answer() -> None:
    response = await complete(request([user("one two three four")], instructions="five six"))

    assert response.usage.input_tokens == 6
    assert response.usage.output_tokens == len(response.text.split())


async def test_the_router_sends_the_offline_model_to_the_offline_model_without_any_key() -> None:
    response = await ModelRouter().complete(request([user("Hello")]))

    assert response.model == "threadline-offline"


async def test_the_router_refuses_other_models_when_openai_is_not_configured() -> None:
    model_request = ModelRequest(model="gpt-4o-mini", instructions="", messages=[user("Hello")])

    with pytest.raises(ModelNotConfigured) as raised:
        await ModelRouter().complete(model_request)

    assert "gpt-4o-mini" in str(raised.value)
    assert "THREADLINE_OPENAI_API_KEY" in str(raised.value)


async def test_the_router_sends_other_models_to_openai_when_configured() -> None:
    class RecordingModel:
        def __init__(self) -> None:
            self.models: list[str] = []

        async def complete(self, request: ModelRequest, on_text: TextListener | None = None) -> ModelResponse:
            self.models.append(request.model)
            return ModelResponse(text="from openai", model=request.model)

    openai = RecordingModel()
    router = ModelRouter(openai=openai)
    to_openai = ModelRequest(model="gpt-4o-mini", instructions="", messages=[user("Hi")])

    answered = await router.complete(to_openai)
    offline = await router.complete(request([user("Hi")]))

    assert answered.text == "from openai"
    assert offline.model == "threadline-offline"
    assert openai.models == ["gpt-4o-mini"]
