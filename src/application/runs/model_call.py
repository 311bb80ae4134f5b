"""One call of the agent's model in a run, its text streamed to the run's followers as it comes."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from application.errors import ModelError
from application.ports.llm import LanguageModel, ModelRequest, ModelResponse
from application.ports.system import Clock, IdGenerator
from application.ports.tracing import Level
from application.runs.context_window import ContextFit, fit_context
from application.runs.step import RunState
from domain.agents import Agent
from domain.ids import MessageId
from domain.messages import Message
from domain.model_catalog import DEFAULT_CONTEXT_TOKENS, answer_tokens, context_tokens
from domain.run_events import MessageDelta

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


def _trace_input(history: Sequence[Message]) -> list[dict[str, Any]]:
    return [{"role": m.role.value, "content": m.text} for m in history[-TRACE_MESSAGES:]]


def _instructions(agent: str, run: str | None) -> str:
    """The agent's instructions, then the run's own (a client's system messages, for this run only)."""
    return "\n\n".join(part for part in (agent.strip(), (run or "").strip()) if part)


def _context_metadata(fit: ContextFit) -> dict[str, Any]:
    return {
        "context": {
            "messages_sent": len(fit.messages),
            "messages_dropped": fit.messages_dropped,
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
        fit = fit_context(
            instructions=instructions, tools=tools, history=state.history, budget_tokens=self._budget(agent)
        )
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
            message_id=message_id, response=response, started_at=started, completed_at=self._clock.now(), context=fit
        )
