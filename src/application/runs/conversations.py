"""Runs asked for the way stateless chat clients ask (the OpenAI-compatible routes): an agent named by its
slug, the conversation so far, instructions for this run only; and the results of the client tools a run
waits for, found by the ids of the calls they answer.

Every such request is a real run: a new thread holds the conversation it was given, or the thread of an
earlier run goes on (`continues`); its events, trace, usage and idempotency key are those of any run.
"""

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from application.caller import Caller
from application.errors import (
    AgentNotFound,
    RunNotFound,
    ThreadNotFound,
)
from application.ports.execution import RunEventBus, RunExecutor
from application.ports.limits import RunRateLimit
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.runs.create_run import check_client_tools, refuse_if_busy
from application.runs.queueing import Queued, StartAtOnce, queue_run
from application.runs.starting import RunStarter
from application.runs.submit_tool_results import SubmitToolResults, SubmitToolResultsCommand, ToolResultInput
from domain.agents import Agent
from domain.errors import InvalidValue
from domain.ids import MessageId, RunId, ThreadId
from domain.messages import ContentPart, MessageRole, TextContent, part_to_dict
from domain.runs import ClientTool, Run, RunStatus
from domain.threads import Thread
from domain.usage import Usage

TURNS_MAX = 1_000
TITLE_MAX = 80
WAITING_PAGE = 200


@dataclass(frozen=True, kw_only=True)
class Turn:
    """A message of the conversation a request carries, appended to the thread before the run."""

    role: MessageRole
    content: tuple[ContentPart, ...]


@dataclass(frozen=True, kw_only=True)
class ConverseCommand:
    caller: Caller
    agent_slug: str
    turns: Sequence[Turn] = ()
    instructions: str | None = None
    """Added to the agent's instructions for this run only."""
    client_tools: Sequence[ClientTool] = ()
    continues: RunId | None = None
    """The run whose thread goes on; a new thread when None."""
    thread_metadata: Mapping[str, str] = field(default_factory=dict)
    """The metadata of a new thread (where the conversation came from)."""
    idempotency_key: str | None = None


@dataclass(frozen=True, kw_only=True)
class Conversing:
    """The run that answers a request, and where its answer begins."""

    run: Run
    created: bool
    """False when the idempotency key named a run that already existed."""
    after_seq: int = 0
    """The run's events that answer this request come after this one (a resumed run's earlier events do not)."""
    usage_before: Usage = field(default_factory=Usage)
    """What the run had used before this request (a resumed run)."""


class Converse:
    """Queues a run of the agent with this slug on a new thread holding the conversation given, or on the
    thread of an earlier run with the new turns appended. The same idempotency key gives back the same run."""

    def __init__(
        self,
        uow: UnitOfWork,
        clock: Clock,
        ids: IdGenerator,
        bus: RunEventBus,
        executor: RunExecutor,
        rate_limit: RunRateLimit | None = None,
    ) -> None:
        self._uow, self._clock, self._ids = uow, clock, ids
        self._starter = RunStarter(uow, bus, executor, rate_limit)

    async def execute(self, command: ConverseCommand) -> Conversing:
        if not command.turns:
            raise InvalidValue("the request holds no message for the agent")
        if len(command.turns) > TURNS_MAX:
            raise InvalidValue(f"a request may hold at most {TURNS_MAX} messages")
        digest = _digest(command) if command.idempotency_key is not None else None
        run, created = await self._starter.start(
            command.caller.org_id,
            command.idempotency_key,
            digest,
            lambda start_on: self._queue(command, digest, start_on),
        )
        return Conversing(run=run, created=created)

    async def _queue(self, command: ConverseCommand, digest: str | None, start_on: StartAtOnce | None) -> Queued:
        org_id = command.caller.org_id
        async with self._uow as uow:
            agent = await uow.agents.get_by_slug(org_id, command.agent_slug)
            if agent is None:
                raise AgentNotFound(f"the model {command.agent_slug!r} does not exist: no agent has that slug")
            await check_client_tools(uow, agent, command.client_tools)
            thread = await self._thread(uow, command, agent)
            now = self._clock.now()
            appended = []
            for turn in command.turns:
                message = thread.append(turn.role, turn.content, message_id=MessageId(self._ids.new()), now=now)
                await uow.messages.add(message)
                appended.append(message)
            await uow.threads.save(thread)
            queued = await queue_run(
                uow,
                clock=self._clock,
                ids=self._ids,
                thread=thread,
                agent=agent,
                input=None,
                client_tools=tuple(command.client_tools),
                idempotency_key=command.idempotency_key,
                request_digest=digest,
                instructions=command.instructions or None,
                start_on=start_on,
                appended=appended,
                to_executor=True,
            )
            await uow.commit()
        return queued

    async def _thread(self, uow: UnitOfWork, command: ConverseCommand, agent: Agent) -> Thread:
        org_id = command.caller.org_id
        if command.continues is not None:
            earlier = await uow.runs.get(org_id, command.continues)
            if earlier is None:
                raise RunNotFound(f"run {command.continues} not found")
            found = await uow.threads.get_to_run(org_id, earlier.thread_id, agent.id)
            if found is None:
                raise ThreadNotFound(f"thread {earlier.thread_id} not found")
            refuse_if_busy(found)
            return found.thread
        now = self._clock.now()
        thread = Thread(
            id=ThreadId(self._ids.new()),
            org_id=org_id,
            agent_id=agent.id,
            title=_title(command.turns),
            metadata=dict(command.thread_metadata),
            created_at=now,
            updated_at=now,
        )
        await uow.threads.add(thread)
        return thread


@dataclass(frozen=True, kw_only=True)
class AnswerToolCallsCommand:
    caller: Caller
    results: Sequence[ToolResultInput]
    run_id: RunId | None = None
    """The run that waits for these results; when None, the run waiting for calls with these ids."""


class AnswerToolCalls:
    """Hands the client's tool results to the run that waits for them, which goes on. A stateless client
    (Chat Completions) names no run: its `tool` messages answer calls by id, and the run is the one of the
    organization that waits for a call with one of those ids (call ids are unique per model answer; the
    newest run wins if two ever share one). None when no run waits for them."""

    def __init__(self, uow: UnitOfWork, submit: SubmitToolResults) -> None:
        self._uow, self._submit = uow, submit

    async def execute(self, command: AnswerToolCallsCommand) -> Conversing | None:
        answered = {r.tool_use_id for r in command.results}
        async with self._uow.read_only() as uow:
            if command.run_id is not None:
                run = await uow.runs.get(command.caller.org_id, command.run_id)
                if run is None:
                    raise RunNotFound(f"run {command.run_id} not found")
            else:
                run = await _waiting_for(uow, command.caller, answered)
                if run is None:
                    return None
            after_seq = await uow.run_events.last_seq(run.id)
        resumed = await self._submit.execute(
            SubmitToolResultsCommand(caller=command.caller, run_id=run.id, results=command.results)
        )
        return Conversing(run=resumed, created=True, after_seq=after_seq, usage_before=run.usage)


async def _waiting_for(uow: UnitOfWork, caller: Caller, call_ids: set[str]) -> Run | None:
    found: Run | None = None
    after: RunId | None = None
    while True:
        page = await uow.runs.list(caller.org_id, limit=WAITING_PAGE, after=after, status=RunStatus.REQUIRES_ACTION)
        for run in page:
            if call_ids & {call.id for call in run.required_action}:
                found = run  # pages come oldest first: the last match is the newest run
        if len(page) < WAITING_PAGE:
            return found
        after = page[-1].id


def _title(turns: Sequence[Turn]) -> str:
    for turn in turns:
        if turn.role is MessageRole.USER:
            text = " ".join(p.text for p in turn.content if isinstance(p, TextContent)).strip()
            if text:
                return text[: TITLE_MAX - 1] + "…" if len(text) > TITLE_MAX else text
    return ""


def _digest(command: ConverseCommand) -> str:
    """A fingerprint of what the request asked for: agent, conversation, instructions, tools, thread."""
    request = {
        "agent": command.agent_slug,
        "turns": [{"role": t.role.value, "content": [part_to_dict(p) for p in t.content]} for t in command.turns],
        "instructions": command.instructions,
        "client_tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters} for t in command.client_tools
        ],
        "continues": str(command.continues) if command.continues else None,
    }
    encoded = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()
