"""Fitting a run's request into the model's context window."""

from dataclasses import replace

import pytest

from application.ports.llm import ToolDefinition
from application.runs.context_window import ContextFit, fit_context, request_tokens
from application.runs.create_run import CreateRun, CreateRunCommand
from domain.agents import ModelSettings
from domain.errors import InvalidValue
from domain.messages import Message, MessageRole, ToolResultContent, ToolUseContent
from domain.model_catalog import DEFAULT_CONTEXT_TOKENS, answer_tokens, context_tokens
from domain.run_events import ContextTrimmed
from tests.builders import assistant, tool_results, user
from tests.unit.fakes.app import FakeApp, admin
from tests.unit.fakes.ports import answer

TOOLS = (ToolDefinition(name="lookup", description="Looks a word up.", parameters={"type": "object"}),)


def step(n: int, result_chars: int) -> list[Message]:
    """A model's tool call and its result."""
    return [
        assistant(ToolUseContent(id=f"call_{n}", name="lookup", params={"word": f"w{n}"})),
        tool_results(ToolResultContent(tool_use_id=f"call_{n}", tool_name="lookup", result="x" * result_chars)),
    ]


def turns(count: int, result_chars: int) -> list[Message]:
    """`count` exchanges: a question, a tool call and its result, an answer."""
    return [m for n in range(count) for m in (user(f"question {n}"), *step(n, result_chars), assistant(f"answer {n}"))]


def fit(history: list[Message], budget: int) -> ContextFit:
    return fit_context(instructions="Be brief.", tools=TOOLS, history=history, budget_tokens=budget)


def assert_pairs_intact(messages: tuple[Message, ...]) -> None:
    """Every tool result follows its call, and every call is followed by its result."""
    open_calls: set[str] = set()
    for message in messages:
        calls = {p.id for p in message.content if isinstance(p, ToolUseContent)}
        results = {p.tool_use_id for p in message.content if isinstance(p, ToolResultContent)}
        if message.role is MessageRole.TOOL:
            assert results <= open_calls, "a tool result without its call"
            open_calls -= results
        else:
            assert not open_calls, "a tool call without its result"
            open_calls = calls
    assert not open_calls


def test_nothing_is_dropped_or_cut_when_the_thread_fits() -> None:
    history = turns(5, 200)

    fitted = fit(history, 100_000)

    assert fitted.messages == tuple(history)
    assert (fitted.messages_dropped, fitted.tool_results_cut, fitted.trimmed) == (0, 0, False)
    assert fitted.estimated_tokens == request_tokens("Be brief.", TOOLS, history)


def test_the_oldest_turns_are_dropped_and_the_request_stays_within_budget() -> None:
    history = [*turns(100, 400), user("the latest question")]

    fitted = fit(history, 2_000)

    assert fitted.estimated_tokens <= 2_000
    assert fitted.messages_dropped > 0
    assert fitted.messages[-1] == history[-1]
    assert fitted.messages == tuple(history[-len(fitted.messages) :]) or fitted.tool_results_cut
    assert len(fitted.messages) + fitted.messages_dropped == len(history)
    assert_pairs_intact(fitted.messages)


def test_a_call_and_its_results_are_kept_or_dropped_together() -> None:
    for budget in range(200, 1_200, 37):
        fitted = fit([*turns(20, 300), user("now?")], budget)
        assert_pairs_intact(fitted.messages)
        assert fitted.messages[0].role is not MessageRole.TOOL


def test_the_latest_user_message_is_kept_though_the_run_went_on_after_it() -> None:
    question = user("the question of this run")
    history = [*turns(10, 100), question, *[m for n in range(100, 130) for m in step(n, 2_000)]]

    fitted = fit(history, 3_000)

    assert question in fitted.messages
    assert fitted.messages[-1] == history[-1]  # the newest result, cut or not
    assert fitted.messages.index(question) == 0
    assert_pairs_intact(fitted.messages)
    assert fitted.estimated_tokens <= 3_000


def test_a_tool_result_too_long_for_the_room_left_is_cut_with_a_marker() -> None:
    history = [user("read the file"), *step(1, 100_000)]

    fitted = fit(history, 4_000)

    result = fitted.messages[-1].content[0]
    assert isinstance(result, ToolResultContent)
    assert result.result.startswith("xxxx")
    assert "characters of this tool result were cut to fit the model's context window" in result.result
    assert 3_000 * 4 < len(result.result) < 4_000 * 4
    assert (fitted.messages_dropped, fitted.tool_results_cut) == (0, 1)
    assert fitted.estimated_tokens <= 4_000
    assert [m.id for m in fitted.messages] == [m.id for m in history]  # the same messages, one of them shortened


def test_results_of_one_step_share_the_room_and_short_ones_stay_whole() -> None:
    calls = assistant(*(ToolUseContent(id=f"c{n}", name="lookup") for n in range(3)))
    results = tool_results(
        ToolResultContent(tool_use_id="c0", tool_name="lookup", result="short"),
        ToolResultContent(tool_use_id="c1", tool_name="lookup", result="a" * 50_000),
        ToolResultContent(tool_use_id="c2", tool_name="lookup", result="b" * 50_000),
    )

    fitted = fit([user("go"), calls, results], 3_000)

    kept = [p.result for p in fitted.messages[-1].content if isinstance(p, ToolResultContent)]
    assert kept[0] == "short"
    assert kept[1].startswith("aaa") and kept[2].startswith("bbb")
    assert abs(len(kept[1]) - len(kept[2])) < 10
    assert fitted.tool_results_cut == 2
    assert fitted.estimated_tokens <= 3_000


def test_an_older_step_at_the_edge_of_the_budget_is_cut_rather_than_dropped() -> None:
    history = [user("one"), *step(1, 8_000), assistant("done"), user("two")]

    fitted = fit(history, 1_500)

    assert [m.id for m in fitted.messages] == [m.id for m in history[1:]]  # the cut result takes the room left
    assert (fitted.messages_dropped, fitted.tool_results_cut) == (1, 1)
    assert fitted.estimated_tokens <= 1_500


def test_tool_definitions_and_instructions_count_against_the_budget() -> None:
    history = turns(30, 100)
    many_tools = tuple(
        ToolDefinition(name=f"tool_{n}", description="d" * 400, parameters={"type": "object"}) for n in range(10)
    )

    plain = fit_context(instructions="", tools=(), history=history, budget_tokens=3_000)
    loaded = fit_context(instructions="i" * 2_000, tools=many_tools, history=history, budget_tokens=3_000)

    assert loaded.messages_dropped > plain.messages_dropped
    assert loaded.estimated_tokens <= 3_000


def test_the_model_catalog_knows_the_windows_of_model_families() -> None:
    assert context_tokens("gpt-4o-mini-2024-07-18") == 128_000
    assert context_tokens("gpt-4.1-nano") == 1_047_576
    assert context_tokens("gpt-5-mini") == 400_000
    assert context_tokens("openai/o3-mini") == 200_000
    assert context_tokens("gpt-4-0613") == 8_192
    assert context_tokens("my-local-llama") == DEFAULT_CONTEXT_TOKENS
    assert context_tokens("my-local-llama", default=4_096) == 4_096
    assert context_tokens("gpt-4o", override=8_192) == 8_192


def test_room_is_kept_for_the_answer() -> None:
    assert answer_tokens(8_192, None) == 2_048
    assert answer_tokens(128_000, None) == 4_096
    assert answer_tokens(128_000, 1_000) == 1_000
    assert answer_tokens(8_192, 100_000) == 4_096


def test_an_agents_context_window_is_validated_and_never_sent_to_the_model() -> None:
    settings = ModelSettings.from_dict({"temperature": 0.5, "context_tokens": 8_192})

    assert settings.as_dict() == {"temperature": 0.5, "context_tokens": 8_192}
    assert settings.sampling().as_dict() == {"temperature": 0.5}
    for bad in (0, 1_000, 20_000_000):
        with pytest.raises(InvalidValue, match="context_tokens"):
            ModelSettings(context_tokens=bad)


# -- the run loop fits each request and says what it left out ------------------------------------------


async def test_a_run_sends_what_fits_and_says_what_it_left_out() -> None:
    app = FakeApp()
    org = await app.organization()
    agent = await app.agent(org, model_settings=ModelSettings(temperature=0.2, context_tokens=2_048))
    thread = await app.thread(agent)
    command = CreateRunCommand(caller=admin(org.id), thread_id=thread.id, input="")
    for n in range(3):
        app.model.then(answer(f"answer {n}"))
        started = CreateRun(app.uow, app.clock, app.ids, app.bus, app.executor)
        run = (await started.execute(replace(command, input=f"question {n} " + "q" * 2_500))).run
        await app.execute_run().execute(run.org_id, run.id)

    first, last = app.model.requests[0], app.model.requests[-1]
    assert len(first.messages) == 1 and [m.text[:10] for m in last.messages] == [
        "answer 0",
        "question 1",
        "answer 1",
        "question 2",
    ]
    assert last.settings.as_dict() == {"temperature": 0.2}  # the window is not sent to the model
    assert app.bus.types(run.id)[-2:] == ["run.context_trimmed", "run.completed"]
    said = app.bus.published[-2].payload
    assert isinstance(said, ContextTrimmed)
    assert (said.step, said.messages_dropped, said.tool_results_cut, said.budget_tokens) == (1, 1, 0, 1_536)
    generation = app.tracer.of(run.id).generations[0]
    assert generation.metadata["context"] == {
        "messages_sent": 4,
        "messages_dropped": 1,
        "messages_summarized": 0,
        "tool_results_cut": 0,
        "estimated_tokens": said.estimated_tokens,
        "budget_tokens": 1_536,
    }
