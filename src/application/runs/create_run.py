"""Starting a run on a thread over the API."""

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from application.caller import Caller
from application.errors import (
    InvalidReference,
    ThreadBusy,
    ThreadNotFound,
)
from application.ports.execution import RunEventBus, RunExecutor
from application.ports.limits import RunRateLimit
from application.ports.persistence import ThreadToRun, UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.runs.queueing import Queued, StartAtOnce, queue_run
from application.runs.starting import RunStarter
from application.runs.tools.assembly import reserved_names
from domain.agents import Agent
from domain.errors import InvalidValue
from domain.ids import AgentId, ThreadId
from domain.runs import ClientTool, Run

INPUT_MAX = 1_000_000


@dataclass(frozen=True, kw_only=True)
class CreateRunCommand:
    caller: Caller
    thread_id: ThreadId
    agent_id: AgentId | None = None
    input: str | None = None
    client_tools: Sequence[ClientTool] = ()
    idempotency_key: str | None = None


@dataclass(frozen=True, kw_only=True)
class CreatedRun:
    run: Run
    created: bool
    """False when the idempotency key named a run that already existed."""


class CreateRun:
    """Queues a run on a thread (appending the input as a user message) and hands it to the executor.
    The same idempotency key within an organization gives back the same run."""

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

    async def execute(self, command: CreateRunCommand) -> CreatedRun:
        if command.input is not None and not (1 <= len(command.input) <= INPUT_MAX):
            raise InvalidValue(f"input must be 1-{INPUT_MAX} characters")
        digest = request_digest(command) if command.idempotency_key is not None else None
        run, created = await self._starter.start(
            command.caller.org_id,
            command.idempotency_key,
            digest,
            lambda start_on: self._queue(command, digest, start_on),
            thread_id=command.thread_id,
        )
        return CreatedRun(run=run, created=created)

    async def _queue(self, command: CreateRunCommand, digest: str | None, start_on: StartAtOnce | None) -> Queued | Run:
        org_id = command.caller.org_id
        async with self._uow as uow:
            found = await uow.threads.get_to_run(org_id, command.thread_id, command.agent_id)
            if found is None:
                raise ThreadNotFound(f"thread {command.thread_id} not found")
            thread = found.thread
            if command.idempotency_key is not None:
                # Concurrent requests with one key queue behind the thread's lock: the first one's run is
                # visible now, and is the answer (not a busy thread).
                existing = await uow.runs.find_by_idempotency_key(org_id, command.idempotency_key)
                if existing is not None:
                    return existing
            agent_id = command.agent_id or thread.agent_id
            if agent_id is None:
                raise InvalidReference("the thread has no agent: give agent_id")
            agent = found.agent
            if agent is None:
                raise InvalidReference(f"agent {agent_id} not found")
            await check_client_tools(uow, agent, command.client_tools)
            refuse_if_busy(found)
            if command.input is None:  # the thread is written all the same, as every run's creation writes it
                await uow.threads.save(thread)
            queued = await queue_run(
                uow,
                clock=self._clock,
                ids=self._ids,
                thread=thread,
                agent=agent,
                input=command.input,
                client_tools=tuple(command.client_tools),
                idempotency_key=command.idempotency_key,
                request_digest=digest,
                start_on=start_on,
                to_executor=True,
            )
            await uow.commit()
        return queued


def refuse_if_busy(found: ThreadToRun) -> None:
    """A thread takes one run at a time: ThreadBusy while the run it has is not finished."""
    if found.unfinished is not None:
        raise ThreadBusy(f"the thread already has a {found.unfinished.status.value} run ({found.unfinished.id})")


async def check_client_tools(uow: UnitOfWork, agent: Agent, client_tools: Sequence[ClientTool]) -> None:
    """Client tools may not take the name of a tool the agent has."""
    if not client_tools:
        return
    subs = [sub for sub in [await uow.agents.get(agent.org_id, i) for i in agent.sub_agent_ids] if sub]
    integrations = await uow.integrations.get_many(agent.org_id, agent.mcp_integration_ids)
    reserved = reserved_names(agent, subs, integrations)
    clashes = [clash for clash in (reserved.clash(t.name) for t in client_tools) if clash]
    if clashes:
        raise InvalidValue("; ".join(clashes))


def request_digest(command: CreateRunCommand) -> str:
    """A fingerprint of what a run was asked for: its thread, agent, input and client tools."""
    request = {
        "thread_id": str(command.thread_id),
        "agent_id": str(command.agent_id) if command.agent_id else None,
        "input": command.input,
        "client_tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters} for t in command.client_tools
        ],
    }
    encoded = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()
