"""Runs: one execution of an agent on a thread, with a state machine that refuses illegal moves."""

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.elicitation import Elicitation, ElicitationAnswer
from domain.errors import IllegalTransition, InvalidValue
from domain.ids import AgentId, OrgId, RunId, ThreadId
from domain.tools import ToolType
from domain.usage import Usage

IDEMPOTENCY_KEY_MAX = 200
CLIENT_TOOLS_MAX = 64
_CLIENT_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
WARNINGS_MAX = 50
ERROR_MESSAGE_MAX = 2_000
INSTRUCTIONS_MAX = 100_000


INTERRUPTED_MESSAGE = "the server stopped while the run was executing"


class RunStatus(StrEnum):
    """Where a run is: queued, in_progress, requires_action (waits for the client), then an end state."""

    QUEUED = "queued"
    IN_PROGRESS = "in_progress"
    REQUIRES_ACTION = "requires_action"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
_MOVES: Mapping[RunStatus, frozenset[RunStatus]] = {
    RunStatus.QUEUED: frozenset({RunStatus.IN_PROGRESS, RunStatus.FAILED, RunStatus.CANCELLED}),
    RunStatus.IN_PROGRESS: frozenset(
        {RunStatus.REQUIRES_ACTION, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED}
    ),
    RunStatus.REQUIRES_ACTION: frozenset({RunStatus.IN_PROGRESS, RunStatus.FAILED, RunStatus.CANCELLED}),
}


class RunNotWaiting(IllegalTransition):
    """Tool results were sent for a run that does not wait for them, or for calls it did not make."""


def _check_answered(
    kind: str, unknown_are: str, what: str, answered: Sequence[str], waiting: Mapping[str, object]
) -> None:
    if len(set(answered)) != len(answered):
        raise RunNotWaiting(f"each {kind} may be answered only once")
    unknown, missing = sorted(set(answered) - set(waiting)), sorted(set(waiting) - set(answered))
    problems = []
    if unknown:
        problems.append(f"{unknown_are}: {', '.join(unknown)}")
    if missing:
        problems.append(f"{what} are missing for: {', '.join(missing)}")
    if problems:
        raise RunNotWaiting("; ".join(problems))


class RunErrorCode(StrEnum):
    """Why a run failed, besides the model's own errors (whose codes come with them)."""

    MAX_STEPS_EXCEEDED = "max_steps_exceeded"
    AGENT_NOT_FOUND = "agent_not_found"
    INTERRUPTED = "interrupted"
    WORKER_LOST = "worker_lost"
    STORAGE_UNAVAILABLE = "storage_unavailable"
    INTERNAL_ERROR = "internal_error"


@dataclass(frozen=True, kw_only=True)
class RunError:
    code: str
    message: str


@dataclass(frozen=True, kw_only=True)
class ClientTool:
    """A tool the API client executes itself: the run pauses until the client sends the result."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not _CLIENT_TOOL_NAME.match(self.name):
            raise InvalidValue(f"client tool name {self.name!r} must be 1-64 characters of [a-zA-Z0-9_-]")
        if self.parameters.get("type", "object") != "object":
            raise InvalidValue(f"client tool {self.name!r}: parameters must be a JSON Schema of type object")


@dataclass(frozen=True, kw_only=True)
class PendingToolCall:
    """A call the run waits for: a client tool, or a displayable native tool the client carries out."""

    id: str
    name: str
    arguments: Mapping[str, Any]
    type: str


@dataclass(frozen=True, kw_only=True)
class StepToolCall:
    id: str
    name: str
    type: str
    is_error: bool = False
    pending: bool = False
    may_call_again: bool = False
    """Its tool only reads (its server says so), its arguments could be read, and it was not made again yet: a run
    resumed while every call of its step was in flight and may be made again makes them again, once (otherwise it
    fails as worker_lost: they may have had effects)."""


@dataclass(frozen=True, kw_only=True)
class StepContext:
    """How a step's request was fitted into the model's context window."""

    messages_sent: int
    messages_dropped: int
    """The thread's oldest messages the request left out."""
    tool_results_cut: int
    """Tool results the request sent shortened."""
    estimated_tokens: int
    budget_tokens: int
    """The request's estimated tokens, and the most it could take (the window less room for the answer)."""
    messages_summarized: int = 0
    """Of the messages left out, how many the request holds a summary of (the agent's summarize_history)."""


@dataclass(frozen=True, kw_only=True)
class RunStep:
    """One model call and the tool calls it asked for."""

    number: int
    model: str
    usage: Usage
    finish_reason: str | None
    started_at: datetime
    completed_at: datetime
    tool_calls: tuple[StepToolCall, ...] = ()
    context: StepContext | None = None
    """How its request was fitted into the model's context window (None for steps stored before runs did)."""


@dataclass(kw_only=True)
class Run:
    id: RunId
    org_id: OrgId
    thread_id: ThreadId
    agent_id: AgentId
    created_at: datetime
    updated_at: datetime
    status: RunStatus = RunStatus.QUEUED
    client_tools: tuple[ClientTool, ...] = ()
    required_action: tuple[PendingToolCall, ...] = ()
    awaiting_input: tuple[Elicitation, ...] = ()
    """Questions the servers of its MCP tool calls asked the user: unanswered while the run requires action;
    answered while it goes on to carry those calls on with the answers."""
    steps: tuple[RunStep, ...] = ()
    usage: Usage = field(default_factory=Usage)
    error: RunError | None = None
    warnings: tuple[str, ...] = ()
    trace_id: str | None = None
    idempotency_key: str | None = None
    request_digest: str | None = None
    """A fingerprint of the request that created the run with its idempotency key (thread, agent, input, tools)."""
    parent_run_id: RunId | None = None
    instructions: str | None = None
    """Added to the agent's instructions for this run only (a client's system messages)."""
    request_id: str | None = None
    """The id of the HTTP request that created the run (its X-Request-Id), to find its log lines."""
    cancel_requested: bool = False
    started_at: datetime | None = None
    ended_at: datetime | None = None
    lease: int = 0
    """How many times a process took the run to execute it. Only the latest taker may write the run: the writes
    of one whose lease is older (it was thought lost, and another took over) are refused."""
    steps_in_ledger: int = 0
    """How many of its steps the usage ledger has (kept by the repository that stores the run, like `lease`)."""

    def __post_init__(self) -> None:
        if self.idempotency_key is not None and not (1 <= len(self.idempotency_key) <= IDEMPOTENCY_KEY_MAX):
            raise InvalidValue(f"idempotency_key must be 1-{IDEMPOTENCY_KEY_MAX} characters")
        if self.instructions is not None and len(self.instructions) > INSTRUCTIONS_MAX:
            raise InvalidValue(f"a run's instructions must be at most {INSTRUCTIONS_MAX} characters")
        if len(self.client_tools) > CLIENT_TOOLS_MAX:
            raise InvalidValue(f"a run takes at most {CLIENT_TOOLS_MAX} client tools")
        names = [t.name for t in self.client_tools]
        if len(set(names)) != len(names):
            raise InvalidValue("client tool names must be unique")

    def _move(self, to: RunStatus, now: datetime) -> None:
        if to not in _MOVES.get(self.status, frozenset()):
            raise IllegalTransition(f"a {self.status.value} run cannot become {to.value}")
        self.status = to
        self.updated_at = now
        if to.is_terminal:
            self.ended_at = now
            self.required_action = ()
            self.awaiting_input = ()

    def start(self, now: datetime) -> None:
        self._move(RunStatus.IN_PROGRESS, now)
        self.started_at = self.started_at or now

    def record_step(self, step: RunStep, now: datetime) -> None:
        if self.status is not RunStatus.IN_PROGRESS:
            raise IllegalTransition(f"a {self.status.value} run takes no steps")
        self.steps = (*self.steps, step)
        self.usage = self.usage + step.usage
        self.updated_at = now

    def settle_tool_calls(self, errors: set[str], now: datetime) -> None:
        """Note which tool calls of the latest step failed."""
        if not self.steps or not errors:
            return
        self._last_calls(lambda c: replace(c, is_error=c.id in errors))
        self.updated_at = now

    def require_action(
        self, calls: tuple[PendingToolCall, ...], now: datetime, questions: tuple[Elicitation, ...] = ()
    ) -> None:
        """Wait for the client: the results of these calls, the user's answers to these questions (whose tool
        calls stay pending in the latest step)."""
        if not calls and not questions:
            raise InvalidValue("a run requires action only for pending tool calls or questions")
        self._move(RunStatus.REQUIRES_ACTION, now)
        self.required_action = calls
        self.awaiting_input = questions
        self._mark_pending({q.tool_call_id for q in questions}, pending=True)

    def _mark_pending(self, call_ids: Collection[str], *, pending: bool) -> None:
        """The latest step's calls with these ids wait for the client (or no longer)."""
        if call_ids and self.steps:
            self._last_calls(lambda c: replace(c, pending=pending) if c.id in call_ids else c)

    def _last_calls(self, change: Callable[[StepToolCall], StepToolCall]) -> None:
        """Each tool call of the latest step as `change` makes it."""
        last = self.steps[-1]
        self.steps = (*self.steps[:-1], replace(last, tool_calls=tuple(change(c) for c in last.tool_calls)))

    def resume(
        self, answered: Sequence[str], now: datetime, failed: Collection[str] = ()
    ) -> dict[str, PendingToolCall]:
        """The client answered the calls with these ids (those in `failed` with an error): every call the run
        waits for, each once. The calls are no longer pending in their step, and the run goes on unless questions
        wait for answers; returns the calls it waited for, by id."""
        if self.status is not RunStatus.REQUIRES_ACTION:
            raise RunNotWaiting(f"the run is {self.status.value}, not waiting for tool results")
        if not self.required_action:
            raise RunNotWaiting("the run waits for answers to its questions, not for tool results")
        waiting = {call.id: call for call in self.required_action}
        _check_answered("tool call", "the run did not make these calls", "results", answered, waiting)
        self.required_action = ()
        self.steps = tuple(
            replace(
                step,
                tool_calls=tuple(
                    replace(c, pending=False, is_error=c.id in failed) if c.pending and c.id in waiting else c
                    for c in step.tool_calls
                ),
            )
            for step in self.steps
        )
        self._go_on_when_answered(now)
        return waiting

    def answer_questions(self, answers: Sequence[tuple[str, ElicitationAnswer]], now: datetime) -> None:
        """The user's answers to every question the run waits for, each checked against its form. The run goes
        on (to carry the calls on with them) unless client tool calls still wait for results."""
        waiting = {q.id: q for q in self.open_questions}
        if self.status is not RunStatus.REQUIRES_ACTION:
            raise RunNotWaiting(f"the run is {self.status.value}, not waiting for answers to questions")
        if not waiting:
            raise RunNotWaiting("the run waits for tool results, not for answers to questions")
        _check_answered("question", "the run did not ask these questions", "answers", [i for i, _ in answers], waiting)
        given = dict(answers)
        self.awaiting_input = tuple(
            q.answered(replace(given[q.id], lease=self.lease)) if q.id in given else q for q in self.awaiting_input
        )
        self.updated_at = now
        self._go_on_when_answered(now)

    def _go_on_when_answered(self, now: datetime) -> None:
        if not self.required_action and not self.open_questions:
            self._move(RunStatus.IN_PROGRESS, now)

    @property
    def open_questions(self) -> tuple[Elicitation, ...]:
        """The questions that wait for the user's answers."""
        return tuple(q for q in self.awaiting_input if q.answer is None)

    @property
    def answered_questions(self) -> tuple[Elicitation, ...]:
        """The answered questions whose tool calls are to be made again with them (the run is in progress)."""
        if self.status is not RunStatus.IN_PROGRESS:
            return ()
        return tuple(q for q in self.awaiting_input if q.answer is not None and not q.live)

    @property
    def asks_live(self) -> bool:
        """Whether a question waits in a call still open in the process that executes the run."""
        return any(q.live for q in self.awaiting_input)

    @property
    def executes(self) -> bool:
        """Whether the run still executes: queued or in progress, or waiting for its user's answer in a call still
        open (not so a run that ended, or waits for its client)."""
        return self.status in (RunStatus.QUEUED, RunStatus.IN_PROGRESS) or (
            self.status is RunStatus.REQUIRES_ACTION and self.asks_live
        )

    def ask_live(self, question: Elicitation, now: datetime) -> None:
        """A call still open asks the user (the run waits; other calls of the step may still be in flight)."""
        if self.status is RunStatus.REQUIRES_ACTION and self.asks_live:
            self.awaiting_input = (*self.awaiting_input, question)
            self._mark_pending({question.tool_call_id}, pending=True)
            self.updated_at = now
        else:
            self.require_action((), now, (question,))

    def took_answer(self, question_id: str, now: datetime) -> None:
        """A live question was answered (or withdrawn: nobody answered in time), and its call went on with what
        it got: the question is done, and the run goes on when nothing else waits."""
        done = next((q for q in self.awaiting_input if q.id == question_id), None)
        if done is None:
            return
        self.awaiting_input = tuple(q for q in self.awaiting_input if q.id != question_id)
        self.updated_at = now
        if not any(q.tool_call_id == done.tool_call_id for q in self.awaiting_input):
            self._mark_pending({done.tool_call_id}, pending=False)
        if self.status is RunStatus.REQUIRES_ACTION and not self.required_action and not self.awaiting_input:
            self._move(RunStatus.IN_PROGRESS, now)

    @property
    def calls_may_be_made_again(self) -> bool:
        """Whether each tool call of the last step may be made again (see StepToolCall.may_call_again)."""
        calls = self.steps[-1].tool_calls if self.steps else ()
        return bool(calls) and all(call.may_call_again for call in calls)

    @property
    def delegated_in_its_last_step(self) -> bool:
        """Whether its last step called sub-agents: their runs execute in its task, and may be left under way when
        the process executing it stops during that step."""
        calls = self.steps[-1].tool_calls if self.steps else ()
        return any(call.type == ToolType.AGENT for call in calls)

    def calls_made_again(self) -> None:
        """The tool calls of the last step are made again (they were in flight when the run's holder stopped): not
        a third time, should this holder stop during them too."""
        self._last_calls(lambda c: replace(c, may_call_again=False))

    @property
    def answers_may_have_been_used(self) -> bool:
        """Whether a taker of the run before this one may have carried the answered calls on already (and was
        lost while they were in flight): the answers were given before the previous take."""
        return any(q.answer is not None and q.answer.lease + 1 < self.lease for q in self.answered_questions)

    def carried_on(self, tool_call_ids: Collection[str], now: datetime) -> None:
        """These calls were carried on with their answers: their questions are done."""
        self.awaiting_input = tuple(q for q in self.awaiting_input if q.tool_call_id not in tool_call_ids)
        self.updated_at = now
        self._mark_pending(tool_call_ids, pending=False)

    def complete(self, now: datetime) -> None:
        self._move(RunStatus.COMPLETED, now)

    def fail(self, code: str, message: str, now: datetime) -> None:
        self._move(RunStatus.FAILED, now)
        self.error = RunError(code=code, message=message[:ERROR_MESSAGE_MAX])

    def interrupt(self, now: datetime) -> None:
        """Its process stopped while it executed."""
        self.fail(RunErrorCode.INTERRUPTED, INTERRUPTED_MESSAGE, now)

    def end_after_its_process(self, code: str, message: str, now: datetime) -> None:
        """Its process was lost before it could record an end: cancelled if its user asked for that (the cancel could
        not reach the process), else failed with `code`."""
        if self.cancel_requested:
            self.cancel(now)
        else:
            self.fail(code, message, now)

    def cancel(self, now: datetime) -> None:
        self._move(RunStatus.CANCELLED, now)

    def request_cancel(self, now: datetime) -> None:
        if self.status.is_terminal:
            raise IllegalTransition(f"a {self.status.value} run cannot be cancelled")
        self.cancel_requested = True
        self.updated_at = now

    def warn(self, warning: str) -> None:
        if len(self.warnings) < WARNINGS_MAX:
            self.warnings = (*self.warnings, warning)

    @property
    def step_count(self) -> int:
        return len(self.steps)
