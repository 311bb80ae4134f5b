"""One call of the agent's model in a run, its text streamed to the run's followers as it comes."""

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from application.errors import ModelError
from application.ports.llm import LanguageModel, ModelRequest, ModelResponse
from application.ports.persistence import HistorySummary
from application.ports.system import Clock, IdGenerator
from application.ports.tracing import Level
from application.runs.context_window import CHARS_PER_TOKEN, ContextFit, fit_context, message_tokens, text_tokens
from application.runs.step import RunState
from domain.agents import Agent, ModelSettings
from domain.ids import MessageId
from domain.messages import Message, MessageRole, TextContent, ToolResultContent, ToolUseContent
from domain.model_catalog import DEFAULT_CONTEXT_TOKENS, answer_tokens, context_tokens
from domain.run_events import MessageDelta
from domain.usage import Usage

TRACE_MESSAGES = 20
"""How many of the latest messages a model call's trace shows: the thread itself is in Threadline, and
showing all of it on every call would make a long thread's trace grow with the square of its length."""


@dataclass(frozen=True, kw_only=True)
class ModelAnswer:
    message_id: MessageId
    """The id the answer is stored under (its text deltas already carried it)."""
    response: ModelResponse
    started_at: datetime
    completed_at: datetime
    context: ContextFit | None = None
    """How the thread was fitted into the model's context window (what the request left out)."""
    summary_usage: Usage = field(default_factory=Usage)
    """What summarizing the messages left out cost, when the step made or extended the thread's summary."""
    summary: HistorySummary | None = None
    """The thread's summary, when the step made or extended it (stored with the step)."""


def _trace_input(history: Sequence[Message]) -> list[dict[str, Any]]:
    return [{"role": m.role.value, "content": m.text} for m in history[-TRACE_MESSAGES:]]


def _instructions(agent: str, run: str | None) -> str:
    """The agent's instructions, then the run's own (a client's system messages, for this run only)."""
    return "\n\n".join(part for part in (agent.strip(), (run or "").strip()) if part)


SUMMARY_SHARE = 8
"""A summary of the messages left out may take up to 1/SUMMARY_SHARE of the request's budget..."""
SUMMARY_TOKENS_MAX = 1_000
"""...and this many tokens at most."""
SUMMARY_CALLS_MAX = 3
"""Model calls a step may make to extend the thread's summary to what its request leaves out."""
SUMMARY_INSTRUCTIONS = (
    "You summarize the beginning of a conversation between a user and an assistant (with the results of the tools"
    " the assistant called) for the assistant, who goes on with the conversation without seeing that beginning."
    " Keep what the rest of the conversation may need: the user's goals and preferences, facts learned, decisions"
    " made, results of tool calls, open questions. Write plain prose, no preamble, at most {words} words."
)
TRANSCRIPT_PART_CHARS = 2_000
"""Each message's part of the transcript the summary is made from is cut to this."""


def _transcript(messages: Sequence[Message], room_chars: int) -> tuple[str, int]:
    """The oldest of the messages that fit `room_chars` (at least one) as plain text for a summarizing call, one
    line each; and how many it holds."""
    lines: list[str] = []
    for message in messages:
        parts: list[str] = []
        for part in message.content:
            match part:
                case TextContent(text=text):
                    parts.append(text)
                case ToolUseContent(name=name, params=params):
                    parts.append(f"[calls {name} with {dict(params)}]")
                case ToolResultContent(result=result, is_error=is_error):
                    parts.append(f"[{'tool error' if is_error else 'tool result'}: {result}]")
        text = " ".join(parts)
        if len(text) > TRANSCRIPT_PART_CHARS:
            text = text[:TRANSCRIPT_PART_CHARS] + "…"
        line = f"{message.role.value}: {text}".replace("\n", " ")
        if lines and len(line) > room_chars:
            break
        lines.append(line)
        room_chars -= len(line) + 1
    return "\n".join(lines), len(lines)


def _context_metadata(fit: ContextFit) -> dict[str, Any]:
    return {
        "context": {
            "messages_sent": len(fit.messages),
            "messages_dropped": fit.messages_dropped,
            "messages_summarized": fit.messages_summarized,
            "tool_results_cut": fit.tool_results_cut,
            "estimated_tokens": fit.estimated_tokens,
            "budget_tokens": fit.budget_tokens,
        }
    }


class ModelCall:
    def __init__(
        self, llm: LanguageModel, ids: IdGenerator, clock: Clock, default_context_tokens: int = DEFAULT_CONTEXT_TOKENS
    ) -> None:
        self._llm, self._ids, self._clock = llm, ids, clock
        self._default_context_tokens = default_context_tokens

    def _budget(self, agent: Agent) -> int:
        """The tokens a request may take: the model's context window less the room kept for its answer."""
        settings = agent.model_settings
        window = context_tokens(agent.model, override=settings.context_tokens, default=self._default_context_tokens)
        return window - answer_tokens(window, settings.max_tokens)

    async def __call__(self, state: RunState) -> ModelAnswer:
        """The model's answer to the thread so far. Raises ModelError when the model cannot answer."""
        agent, events = state.agent, state.events
        message_id = MessageId(self._ids.new())
        started = self._clock.now()
        instructions = _instructions(agent.instructions, state.run.instructions)
        tools = state.tools.definitions()
        budget = self._budget(agent)
        fit = fit_context(instructions=instructions, tools=tools, history=state.history, budget_tokens=budget)
        summary_usage, summary = Usage(), None
        if fit.messages_dropped and agent.model_settings.summarize_history:
            fit, summary_usage, summary = await self._summarized(state, instructions, budget)
        generation = state.trace.generation(
            f"step {state.run.step_count + 1}",
            model=agent.model,
            model_parameters=agent.model_settings.sampling().as_dict(),
            input=_trace_input(fit.messages),
            metadata=_context_metadata(fit),
        )

        async def on_text(delta: str) -> None:
            await events.publish(events.make(MessageDelta(message_id=message_id, text=delta)))

        request = ModelRequest(
            model=agent.model,
            instructions=instructions,
            messages=fit.messages,
            tools=tools,
            settings=agent.model_settings.sampling(),
            parallel_tool_calls=agent.parallel_tool_calls,
        )
        try:
            response = await self._llm.complete(request, on_text=on_text)
        except ModelError as error:
            generation.end(level=Level.ERROR, status_message=error.detail)
            raise
        generation.end(
            output={
                "text": response.text,
                "tool_calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in response.tool_calls],
            },
            usage=response.usage,
            model=response.model or agent.model,
        )
        return ModelAnswer(
            message_id=message_id,
            response=response,
            started_at=started,
            completed_at=self._clock.now(),
            context=fit,
            summary_usage=summary_usage,
            summary=summary,
        )

    async def _summarized(
        self, state: RunState, instructions: str, budget: int
    ) -> tuple[ContextFit, Usage, HistorySummary | None]:
        """The request fitted with room kept for a summary of what it leaves out, and that summary in front of its
        messages; what making it cost, and the summary when this step made or extended it.

        The thread's summary always covers its oldest messages (those numbered below `covers_upto`); a step
        extends it to the messages its request leaves out, oldest first, one model call per chunk that fits the
        window, SUMMARY_CALLS_MAX calls at most (a long thread summarized for the first time is caught up over
        several steps and runs; meanwhile the messages between the summary and the request are left out
        unsummarized, and the request says how many). When the model fails, the request goes with the summary as
        it was, or none."""
        tools = state.tools.definitions()
        room = min(SUMMARY_TOKENS_MAX, budget // SUMMARY_SHARE)
        fit = fit_context(instructions=instructions, tools=tools, history=state.history, budget_tokens=budget - room)
        dropped = state.history[: fit.messages_dropped]
        summary, usage, made = state.history_summary, Usage(), False
        for _ in range(SUMMARY_CALLS_MAX):
            waiting = [m for m in dropped if summary is None or m.position >= summary.covers_upto]
            if not waiting:
                break
            try:
                summary, cost = await self._extend(state, summary, waiting, room, budget)
            except ModelError:
                break
            usage, made = usage + cost, True
        state.history_summary = summary
        summarized = sum(1 for m in dropped if summary is not None and m.position < summary.covers_upto)
        if summary is None or not summarized:
            return replace(fit, budget_tokens=budget), usage, None
        skipped = len(dropped) - summarized
        note = f"[Summary of the first {summarized} messages of this conversation, which are left out" + (
            f"; the {skipped} messages after them are left out too]\n" if skipped else "]\n"
        )
        message = replace(state.history[0], role=MessageRole.USER, content=(TextContent(text=note + summary.text),))
        fitted = replace(
            fit,
            messages=(message, *fit.messages),
            estimated_tokens=fit.estimated_tokens + message_tokens(message),
            budget_tokens=budget,
            messages_summarized=summarized,
        )
        return fitted, usage, summary if made else None

    async def _extend(
        self, state: RunState, earlier: HistorySummary | None, waiting: Sequence[Message], room: int, budget: int
    ) -> tuple[HistorySummary, Usage]:
        """The summary extended to the oldest of the waiting messages that fit one call (at least one)."""
        agent = state.agent
        words = max(50, room * 3 // 4 - 20)
        room_chars = max(budget - room - text_tokens(SUMMARY_INSTRUCTIONS) - 200, 400) * CHARS_PER_TOKEN
        if earlier is not None:
            room_chars -= len(earlier.text)
        transcript, count = _transcript(waiting, room_chars)
        if earlier is not None:
            transcript = f"Summary of what came before:\n{earlier.text}\n\nThen:\n{transcript}"
        request_message = replace(state.history[0], role=MessageRole.USER, content=(TextContent(text=transcript),))
        request = ModelRequest(
            model=agent.model,
            instructions=SUMMARY_INSTRUCTIONS.format(words=words),
            messages=(request_message,),
            tools=(),
            settings=ModelSettings(max_tokens=room, temperature=agent.model_settings.temperature),
        )
        generation = state.trace.generation(
            "summary of earlier messages",
            model=agent.model,
            model_parameters=request.settings.as_dict(),
            input=[{"role": "user", "content": transcript}],
            metadata={"messages_summarized": count, "extends_earlier_summary": earlier is not None},
        )
        try:
            response = await self._llm.complete(request)
            if not response.text.strip():
                raise ModelError("the model answered an empty summary")
        except ModelError as error:
            generation.end(level=Level.ERROR, status_message=error.detail)
            raise
        generation.end(output={"text": response.text}, usage=response.usage, model=response.model or agent.model)
        covers_upto = waiting[count - 1].position + 1
        return HistorySummary(covers_upto=covers_upto, text=response.text.strip()), response.usage
