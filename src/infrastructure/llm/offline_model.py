"""A deterministic stand-in for a language model, so the run loop can be tried without an API key."""

import json
import re
from collections.abc import Sequence

from application.ports.llm import ModelRequest, ModelResponse, ModelToolCall, TextListener
from domain.messages import ImageContent, Message, MessageRole, ToolResultContent, ToolUseContent
from domain.usage import Usage
from infrastructure.llm.tool_arguments import parse_tool_arguments

OFFLINE_MODEL = "threadline-offline"
RESULT_MAX = 500
QUOTE_MAX = 200
_CALL_LINE = re.compile(r"^\s*call\s+(?P<name>\S+)(?:\s+(?P<arguments>.*?))?\s*$")
# Three words to a streamed chunk, whitespace kept so that the chunks join back into the answer.
_CHUNK = re.compile(r"\s*\S+(?:\s+\S+){0,2}\s*")


class OfflineLanguageModel:
    """The model `threadline-offline`: no network, no randomness, the same answer for the same thread.

    - When the newest message is a user message with lines `call <tool_name>`, each optionally followed
      by a JSON object (`call everything__echo {"message": "hi"}`), it calls those tools, one call per
      line, with ids `call_1`, `call_2`, ... numbered on from the calls already in the thread. Arguments
      that are not a JSON object give a call with empty arguments and `arguments_error` set. If a line
      names a tool the agent does not have, it calls nothing and answers with the available tool names.
    - When the newest message holds tool results, it answers with one line per result:
      `<tool_name> returned: <result>` (or `failed:` for an error), results over 500 characters cut
      with a `[... N more characters]` marker.
    - Otherwise it quotes the latest user text, says how many messages the thread has and quotes the
      first line of the agent's instructions, if any.

    Streaming delivers the answer in chunks of three words. Usage counts words as tokens: the
    instructions and messages as input, the answer and call arguments as output.
    """

    async def complete(self, request: ModelRequest, on_text: TextListener | None = None) -> ModelResponse:
        newest = request.messages[-1] if request.messages else None
        text = ""
        tool_calls: list[ModelToolCall] = []
        if newest is not None and newest.role is MessageRole.USER and _call_lines(newest.text):
            text, tool_calls = _tool_calls_or_refusal(request, _call_lines(newest.text))
        elif newest is not None and newest.role is MessageRole.TOOL:
            text = _summary_of_results(newest)
        else:
            text = _reply_to_conversation(request)
        if on_text is not None:
            for chunk in text_chunks(text):
                await on_text(chunk)
        output = _words(text) + sum(_words(json.dumps(dict(call.arguments))) for call in tool_calls)
        return ModelResponse(
            text=text,
            tool_calls=tuple(tool_calls),
            usage=Usage(input_tokens=max(1, _input_words(request)), output_tokens=max(1, output)),
            finish_reason="tool_calls" if tool_calls else "stop",
            model=OFFLINE_MODEL,
        )


def text_chunks(text: str) -> list[str]:
    """The answer cut into groups of words that join back into exactly the answer."""
    chunks = _CHUNK.findall(text)
    return chunks if "".join(chunks) == text else [text] if text else []


def _call_lines(text: str) -> list[tuple[str, str]]:
    matches = (_CALL_LINE.match(line) for line in text.splitlines())
    return [(m["name"], m["arguments"] or "") for m in matches if m is not None]


def _tool_calls_or_refusal(request: ModelRequest, lines: Sequence[tuple[str, str]]) -> tuple[str, list[ModelToolCall]]:
    available = [tool.name for tool in request.tools]
    unknown = [name for name, _ in lines if name not in available]
    if unknown:
        offered = ", ".join(available) if available else "none (this agent has no tools)"
        names = ", ".join(dict.fromkeys(unknown))
        return f"I cannot call {names}: there is no such tool. Available tools: {offered}.", []
    first = 1 + sum(isinstance(part, ToolUseContent) for message in request.messages for part in message.content)
    calls = []
    for number, (name, raw) in enumerate(lines, start=first):
        arguments, error = parse_tool_arguments(name, raw)
        calls.append(ModelToolCall(id=f"call_{number}", name=name, arguments=arguments, arguments_error=error))
    return "", calls


def _summary_of_results(message: Message) -> str:
    lines = []
    for part in message.content:
        if isinstance(part, ToolResultContent):
            verb = "failed" if part.is_error else "returned"
            lines.append(f"{part.tool_name} {verb}: {_shortened(part.result, RESULT_MAX)}")
    return "\n".join(lines)


def _reply_to_conversation(request: ModelRequest) -> str:
    count = len(request.messages)
    sentences = []
    latest_user = next((m for m in reversed(request.messages) if m.role is MessageRole.USER), None)
    if latest_user is None:
        sentences.append("There is no user message to answer yet.")
    else:
        images = sum(isinstance(part, ImageContent) for part in latest_user.content)
        quoted = " ".join(latest_user.text.split())
        said = f'You said: "{_shortened(quoted, QUOTE_MAX)}"'
        if images:
            said += f" with {images} image{'s' if images > 1 else ''}"
        sentences.append(said + ".")
    sentences.append(f"This thread has {count} message{'' if count == 1 else 's'}.")
    first_line = next((line.strip() for line in request.instructions.splitlines() if line.strip()), "")
    if first_line:
        sentences.append(f'My instructions begin: "{_shortened(first_line, QUOTE_MAX)}".')
    return " ".join(sentences)


def _shortened(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters]"


def _words(text: str) -> int:
    return len(text.split())


def _input_words(request: ModelRequest) -> int:
    total = _words(request.instructions)
    for message in request.messages:
        for part in message.content:
            if isinstance(part, ToolUseContent):
                total += _words(part.name) + _words(json.dumps(dict(part.params)))
            elif isinstance(part, ToolResultContent):
                total += _words(part.result)
        total += _words(message.text)
    return total
