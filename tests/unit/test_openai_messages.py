import json

from application.ports.llm import ToolDefinition
from domain.messages import ImageContent, MessageRole, ToolResultContent, ToolUseContent
from infrastructure.llm.openai_messages import chat_messages, chat_tools
from tests.builders import assistant, message, tool_results, user

PNG = "iVBORw0KGgo="


def test_instructions_become_the_first_system_message_and_empty_ones_are_left_out() -> None:
    conversation = [user("Hello")]

    assert chat_messages("Be brief.", conversation) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
    ]
    assert chat_messages("  \n", conversation) == [{"role": "user", "content": "Hello"}]


def test_a_user_message_with_images_becomes_text_and_image_url_parts() -> None:
    converted = chat_messages(
        "",
        [
            user(
                "What is in these pictures?",
                ImageContent(url="https://example.com/cat.png"),
                ImageContent(data=PNG, mime_type="image/png"),
            )
        ],
    )

    assert converted == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these pictures?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        }
    ]


def test_text_only_user_and_system_messages_are_plain_strings() -> None:
    converted = chat_messages("", [message(MessageRole.SYSTEM, "Context"), user("line one", "line two")])

    assert converted == [
        {"role": "system", "content": "Context"},
        {"role": "user", "content": "line one\nline two"},
    ]


def test_an_assistant_message_carries_its_text_and_tool_calls_with_json_arguments() -> None:
    converted = chat_messages(
        "",
        [
            assistant(
                "Let me look.",
                ToolUseContent(id="call_1", name="search", params={"q": "café", "n": 3}),
                ToolUseContent(id="call_2", name="clock"),
            )
        ],
    )

    assert len(converted) == 1
    sent = converted[0]
    assert sent["role"] == "assistant"
    assert sent["content"] == "Let me look."
    assert [(c["id"], c["type"], c["function"]["name"]) for c in sent["tool_calls"]] == [
        ("call_1", "function", "search"),
        ("call_2", "function", "clock"),
    ]
    assert json.loads(sent["tool_calls"][0]["function"]["arguments"]) == {"q": "café", "n": 3}
    assert json.loads(sent["tool_calls"][1]["function"]["arguments"]) == {}


def test_an_assistant_message_with_only_tool_calls_has_no_content() -> None:
    converted = chat_messages("", [assistant(ToolUseContent(id="call_1", name="clock"))])

    assert converted[0]["content"] is None
    assert len(converted[0]["tool_calls"]) == 1


def test_each_tool_result_becomes_its_own_tool_message_in_order() -> None:
    converted = chat_messages(
        "",
        [
            tool_results(
                ToolResultContent(tool_use_id="call_1", tool_name="search", result="3 hits"),
                ToolResultContent(tool_use_id="call_2", tool_name="clock", result="no clock", is_error=True),
            )
        ],
    )

    assert converted == [
        {"role": "tool", "tool_call_id": "call_1", "content": "3 hits"},
        {"role": "tool", "tool_call_id": "call_2", "content": "no clock"},
    ]


def test_tools_are_offered_as_function_tools() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    assert chat_tools([ToolDefinition(name="search", description="Search the web", parameters=schema)]) == [
        {
            "type": "function",
            "function": {"name": "search", "description": "Search the web", "parameters": schema},
        }
    ]
