"""The fake OpenAI server as the benchmarks start it: a separate process on a free port."""

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from application.ports.llm import ModelRequest, ToolDefinition
from domain.messages import ToolResultContent, ToolUseContent
from infrastructure.llm import OpenAiLanguageModel
from tests.builders import assistant, tool_results, user

ROOT = Path(__file__).resolve().parents[2]
ECHO = ToolDefinition(name="everything__echo", description="Echo", parameters={"type": "object"})


@pytest.fixture
async def fake_process_url() -> AsyncIterator[str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.fakes.openai_server",
        "--port",
        "0",
        "--script",
        "tool-then-text",
        "--tool-name",
        "everything__echo",
        "--tool-args",
        '{"message": "hi"}',
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), timeout=15)).decode().strip()
    try:
        assert line.startswith("listening on http://127.0.0.1:")
        yield line.removeprefix("listening on ")
    finally:
        process.terminate()
        assert await asyncio.wait_for(process.wait(), timeout=10) == 0


async def test_the_tool_then_text_script_calls_the_tool_then_answers_from_its_result(
    fake_process_url: str,
) -> None:
    model = OpenAiLanguageModel(api_key="sk-bench", base_url=fake_process_url, max_retries=0)
    conversation = [user("Echo hi")]
    try:
        first = await model.complete(
            ModelRequest(model="gpt-bench", instructions="", messages=conversation, tools=[ECHO])
        )
        (call,) = first.tool_calls
        conversation += [
            assistant(ToolUseContent(id=call.id, name=call.name, params=call.arguments)),
            tool_results(ToolResultContent(tool_use_id=call.id, tool_name=call.name, result="hi")),
        ]
        second = await model.complete(
            ModelRequest(model="gpt-bench", instructions="", messages=conversation, tools=[ECHO])
        )
    finally:
        await model.aclose()

    assert (call.name, call.arguments) == ("everything__echo", {"message": "hi"})
    assert second.tool_calls == ()
    assert second.text == "everything__echo returned: hi"
