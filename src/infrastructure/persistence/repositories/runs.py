import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Text, and_, bindparam, case, cast, false, func, insert, null, or_, select, update
from sqlalchemy.exc import IntegrityError

from application.errors import CancelRequested, LeaseLost
from application.ports.persistence import ClaimedRun, ClaimedToExecute
from domain.elicitation import Elicitation, ElicitationAction, ElicitationAnswer
from domain.ids import AgentId, OrgId, RunId, ThreadId
from domain.run_events import RunEvent, RunEventType
from domain.runs import (
    ClientTool,
    PendingToolCall,
    Run,
    RunError,
    RunStatus,
    RunStep,
    StepContext,
    StepToolCall,
)
from domain.usage import Usage
from infrastructure.persistence.batching import UnitConnection
from infrastructure.persistence.errors import refused
from infrastructure.persistence.prepared import Prepared
from infrastructure.persistence.repositories._rows import utc, utc_required
from infrastructure.persistence.repositories.agents import JOINED_AGENT, agent_of, joined_agent
from infrastructure.persistence.repositories.run_jobs import WITHOUT_A_JOB
from infrastructure.persistence.repositories.usage import record_new_steps
from infrastructure.persistence.run_holders import (
    NOT_HELD_BY_A_LIVE_PROCESS,
    PROCESS_KEY,
    SILENCE_OF_THE_STRANDED,
    SILENT_HOLDER,
    SILENT_HOLDERS,
    WITNESS,
    witnessed,
)
from infrastructure.persistence.tables import UNFINISHED_STATUSES, agents, is_unfinished, run_events, runs
from infrastructure.run_event_json import event_data, event_payload


def _step_to_json(step: RunStep) -> dict[str, Any]:
    return {
        "number": step.number,
        "model": step.model,
        "input_tokens": step.usage.input_tokens,
        "output_tokens": step.usage.output_tokens,
        "cached_tokens": step.usage.cached_tokens,
        "finish_reason": step.finish_reason,
        "started_at": step.started_at.isoformat(),
        "completed_at": step.completed_at.isoformat(),
        "tool_calls": [
            {
                "id": c.id,
                "name": c.name,
                "type": c.type,
                "is_error": c.is_error,
                "pending": c.pending,
                # Only when true: a process of an earlier version reading the run never meets it.
                **({"may_call_again": True} if c.may_call_again else {}),
            }
            for c in step.tool_calls
        ],
        "context": None if step.context is None else dataclasses.asdict(step.context),
    }


_STEP_CALL_FIELDS = frozenset(field.name for field in dataclasses.fields(StepToolCall))
"""What a step's call is read from: a key a later version may add is left out."""


def _step_from_json(data: dict[str, Any]) -> RunStep:
    return RunStep(
        number=data["number"],
        model=data["model"],
        usage=Usage(
            input_tokens=data["input_tokens"],
            output_tokens=data["output_tokens"],
            cached_tokens=data.get("cached_tokens", 0),
        ),
        finish_reason=data.get("finish_reason"),
        started_at=datetime.fromisoformat(data["started_at"]),
        completed_at=datetime.fromisoformat(data["completed_at"]),
        tool_calls=tuple(
            StepToolCall(**{key: value for key, value in c.items() if key in _STEP_CALL_FIELDS})
            for c in data.get("tool_calls", [])
        ),
        context=StepContext(**data["context"]) if data.get("context") else None,
    )


def _question_to_json(question: Elicitation) -> dict[str, Any]:
    answer = question.answer
    return {
        "id": question.id,
        "tool_call_id": question.tool_call_id,
        "tool_name": question.tool_name,
        "key": question.key,
        "message": question.message,
        "requested_schema": dict(question.requested_schema),
        "request_state": question.request_state,
        "live": question.live,
        "answer": None
        if answer is None
        else {
            "action": answer.action.value,
            "content": dict(answer.content) if answer.content is not None else None,
            "lease": answer.lease,
        },
    }


def _question_from_json(data: dict[str, Any]) -> Elicitation:
    answer = data.get("answer")
    return Elicitation(
        id=data["id"],
        tool_call_id=data["tool_call_id"],
        tool_name=data["tool_name"],
        key=data["key"],
        message=data["message"],
        requested_schema=data["requested_schema"],
        request_state=data.get("request_state"),
        live=bool(data.get("live", False)),
        answer=None
        if answer is None
        else ElicitationAnswer(
            action=ElicitationAction(answer["action"]), content=answer.get("content"), lease=answer["lease"]
        ),
    )


def _to_entity(row: Any) -> Run:
    steps = tuple(_step_from_json(s) for s in row.steps)
    return Run(
        id=RunId(row.id),
        org_id=OrgId(row.org_id),
        thread_id=ThreadId(row.thread_id),
        agent_id=AgentId(row.agent_id),
        parent_run_id=RunId(row.parent_run_id) if row.parent_run_id else None,
        status=RunStatus(row.status),
        client_tools=tuple(ClientTool(**t) for t in row.client_tools),
        required_action=tuple(PendingToolCall(**c) for c in row.required_action),
        awaiting_input=tuple(_question_from_json(q) for q in row.awaiting_input),
        steps=steps,
        usage=Usage(
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            cached_tokens=sum(s.usage.cached_tokens for s in steps),
        ),
        error=RunError(code=row.error_code, message=row.error_message or "") if row.error_code else None,
        warnings=tuple(row.warnings),
        trace_id=row.trace_id,
        idempotency_key=row.idempotency_key,
        request_digest=row.request_digest,
        instructions=row.instructions,
        request_id=row.request_id,
        cancel_requested=row.cancel_requested,
        created_at=utc_required(row.created_at),
        updated_at=utc_required(row.updated_at),
        started_at=utc(row.started_at),
        ended_at=utc(row.ended_at),
        lease=row.lease,
        steps_in_ledger=len(steps),
    )


def _values(run: Run) -> dict[str, Any]:
    return {
        "status": run.status.value,
        "client_tools": [
            {"name": t.name, "description": t.description, "parameters": dict(t.parameters)} for t in run.client_tools
        ],
        "required_action": [
            {"id": c.id, "name": c.name, "arguments": dict(c.arguments), "type": c.type} for c in run.required_action
        ],
        "awaiting_input": [_question_to_json(q) for q in run.awaiting_input],
        "steps": [_step_to_json(s) for s in run.steps],
        "input_tokens": run.usage.input_tokens,
        "output_tokens": run.usage.output_tokens,
        "error_code": run.error.code if run.error else None,
        "error_message": run.error.message if run.error else None,
        "warnings": list(run.warnings),
        "trace_id": run.trace_id,
        "updated_at": run.updated_at,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
    }


# The statements a run uses at every step: compiled once, sent straight to the driver (prepared.py).
_WHERE = (runs.c.org_id == bindparam("p_org"), runs.c.id == bindparam("p_id"))
_GET = Prepared(select(runs).where(*_WHERE))
_GET_FOR_UPDATE = Prepared(select(runs).where(*_WHERE).with_for_update())
# A run that stops executing (it ends, or waits for its client) gives its organization's slot back with the write
# that stops it (worker mode's admission: limits/admission.py; in-process runs never hold one). A run waiting for its
# user's answer to a question asked in an open tool call still executes (the call waits in its process).
_SLOT = {"admitted_at": case((bindparam("p_executing", type_=Boolean), runs.c.admitted_at), else_=null())}
_SAVE = Prepared(update(runs).where(*_WHERE, runs.c.lease == bindparam("p_lease")).values(_SLOT))
_LAST_SEQ_OF_RUN = select(func.max(run_events.c.seq)).where(run_events.c.run_id == runs.c.id).scalar_subquery()
_CLAIMING = (
    update(runs)
    .where(*_WHERE)
    .values(lease=runs.c.lease + 1, holder=PROCESS_KEY)
    .returning(*runs.c, _LAST_SEQ_OF_RUN.label("last_event_seq"))
)
_CLAIM = Prepared(_CLAIMING)
_CLAIMED = _CLAIMING.cte("claimed")
_CLAIM_WITH_AGENT = Prepared(  # PostgreSQL (SQLite has no UPDATE in a WITH): the claim and its agent in one statement
    select(_CLAIMED, *JOINED_AGENT).select_from(
        _CLAIMED.outerjoin(agents, and_(agents.c.org_id == _CLAIMED.c.org_id, agents.c.id == _CLAIMED.c.agent_id))
    )
)
_INSERT = Prepared(insert(runs))
_SAVE_UNLESS_CANCEL = Prepared(
    update(runs).where(*_WHERE, runs.c.lease == bindparam("p_lease"), runs.c.cancel_requested == false()).values(_SLOT)
)
_HOLD = Prepared(select(runs.c.lease, runs.c.cancel_requested).where(*_WHERE))
_ACTIVE_IN_THREAD = Prepared(
    select(runs)
    .where(runs.c.org_id == bindparam("p_org"), runs.c.thread_id == bindparam("p_thread"), is_unfinished(runs.c.status))
    .limit(1)
)
_EVENT_INSERT = Prepared(insert(run_events))
_LAST_SEQ = Prepared(select(func.max(run_events.c.seq)).where(run_events.c.run_id == bindparam("p_run")))
_EVENTS = Prepared(
    select(run_events)
    .where(
        run_events.c.org_id == bindparam("p_org"),
        run_events.c.run_id == bindparam("p_run"),
        run_events.c.seq > bindparam("p_after"),
    )
    .order_by(run_events.c.seq)
)


# Worker mode's runs that no one executes any more: queued or in progress, with no job, their holder silent.
_STRANDED = (
    runs.c.status.in_((RunStatus.QUEUED.value, RunStatus.IN_PROGRESS.value)),
    SILENT_HOLDER,
    WITHOUT_A_JOB,
)


class SqlRunRepository:
    def __init__(self, connection: UnitConnection, *, queued: bool = False) -> None:
        """`queued`: runs execute from the job queue (worker mode)."""
        self._conn, self._queued = connection, queued

    async def add(self, run: Run) -> None:
        values = _values(run) | {
            "id": run.id,
            "org_id": run.org_id,
            "thread_id": run.thread_id,
            "agent_id": run.agent_id,
            "parent_run_id": run.parent_run_id,
            "idempotency_key": run.idempotency_key,
            "request_digest": run.request_digest,
            "instructions": run.instructions,
            "request_id": run.request_id,
            "cancel_requested": run.cancel_requested,
            "created_at": run.created_at,
            "lease": run.lease,
            "holder": PROCESS_KEY,
        }
        if run.idempotency_key is None:  # nothing to refuse it: sent with the unit's other writes
            await self._conn.later(_INSERT, values)
            return
        try:
            await self._conn.run(_INSERT, values)
        except IntegrityError as error:
            raise refused(error, run.idempotency_key) from None

    async def get(self, org_id: OrgId, run_id: RunId, *, for_update: bool = False) -> Run | None:
        query = _GET_FOR_UPDATE if for_update else _GET
        row = (await self._conn.run(query, {"p_org": org_id, "p_id": run_id})).first()
        return _to_entity(row) if row else None

    async def claim(self, org_id: OrgId, run_id: RunId) -> ClaimedRun | None:
        # One statement: the bump locks the row as SELECT ... FOR UPDATE would, and returns it.
        row = (await self._conn.run(_CLAIM, {"p_org": org_id, "p_id": run_id})).first()
        return ClaimedRun(_to_entity(row), row.last_event_seq or 0) if row else None

    async def claim_to_execute(self, org_id: OrgId, run_id: RunId) -> ClaimedToExecute | None:
        if self._conn.dialect.name != "postgresql":  # one hop either way (sqlite_driver.py)
            claimed = await self.claim(org_id, run_id)
            if claimed is None:
                return None
            agent = await agent_of(self._conn, org_id, claimed.run.agent_id)
            return ClaimedToExecute(claimed.run, claimed.last_event_seq, agent)
        row = (await self._conn.run(_CLAIM_WITH_AGENT, {"p_org": org_id, "p_id": run_id})).first()
        if row is None:
            return None
        return ClaimedToExecute(_to_entity(row), row.last_event_seq or 0, joined_agent(row))

    async def find_by_idempotency_key(self, org_id: OrgId, key: str) -> Run | None:
        query = select(runs).where(runs.c.org_id == org_id, runs.c.idempotency_key == key)
        row = (await self._conn.execute(query)).first()
        return _to_entity(row) if row else None

    async def list(
        self,
        org_id: OrgId,
        *,
        limit: int,
        after: RunId | None,
        thread_id: ThreadId | None = None,
        agent_id: AgentId | None = None,
        status: RunStatus | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> Sequence[Run]:
        query = select(runs).where(runs.c.org_id == org_id).order_by(runs.c.id).limit(limit)
        if created_after is not None:
            query = query.where(runs.c.created_at >= created_after)
        if created_before is not None:
            query = query.where(runs.c.created_at < created_before)
        if after is not None:
            query = query.where(runs.c.id > after)
        if thread_id is not None:
            query = query.where(runs.c.thread_id == thread_id)
        if agent_id is not None:
            query = query.where(runs.c.agent_id == agent_id)
        if status is not None:
            query = query.where(runs.c.status == status.value)
        return [_to_entity(row) for row in await self._conn.execute(query)]

    async def active_in_thread(self, org_id: OrgId, thread_id: ThreadId) -> Run | None:
        row = (await self._conn.run(_ACTIVE_IN_THREAD, {"p_org": org_id, "p_thread": thread_id})).first()
        return _to_entity(row) if row else None

    async def unfinished(self, limit: int, after: RunId | None = None) -> Sequence[Run]:
        asks_live = and_(
            runs.c.status == RunStatus.REQUIRES_ACTION.value,
            cast(runs.c.awaiting_input, Text).like('%"live": true%'),  # a question whose open call was lost
        )
        query = (
            select(runs)
            .where(or_(runs.c.status.in_((RunStatus.QUEUED.value, RunStatus.IN_PROGRESS.value)), asks_live))
            .order_by(runs.c.id)
            .limit(limit)
        )
        if after is not None:
            query = query.where(runs.c.id > after)
        if self._conn.dialect.name == "postgresql":  # several processes may share it: not the live ones' runs
            query = query.where(NOT_HELD_BY_A_LIVE_PROCESS)
        return [_to_entity(row) for row in await self._conn.execute(query)]

    async def stranded(self, silent_seconds: float, limit: int, after: RunId | None = None) -> Sequence[Run]:
        if not self._queued:
            return []
        parameters = {"silent_seconds": silent_seconds}
        silent = [(row.holder, row.seen_at) for row in await self._conn.execute(SILENT_HOLDERS, parameters)]
        stopped = WITNESS.saw(silent, patience=silent_seconds / SILENCE_OF_THE_STRANDED)
        if not stopped:
            return []
        # Through the index on status (the runs that have not ended are few), each looked for in the job queue by
        # its lock (migration 0022) and its holder by its key.
        query = select(runs).where(*_STRANDED).order_by(runs.c.id).limit(limit)
        if after is not None:
            query = query.where(runs.c.id > after)
        return [_to_entity(row) for row in await self._conn.execute(query, parameters | witnessed(stopped))]

    async def claim_stranded(self, run: Run, silent_seconds: float) -> ClaimedRun | None:
        # One statement: stranded still, and claimed, or left as it is (its holder was heard from again, a job of
        # its own was queued, or someone took it since it was read).
        claim = (
            update(runs)
            .where(runs.c.org_id == run.org_id, runs.c.id == run.id, runs.c.lease == run.lease, *_STRANDED)
            .values(lease=runs.c.lease + 1, holder=PROCESS_KEY)
            .returning(*runs.c, _LAST_SEQ_OF_RUN.label("last_event_seq"))
        )
        parameters = {"silent_seconds": silent_seconds} | witnessed(WITNESS.stopped)
        row = (await self._conn.execute(claim, parameters)).first()
        return ClaimedRun(_to_entity(row), row.last_event_seq or 0) if row else None

    async def unfinished_children(self, org_id: OrgId, run_id: RunId) -> Sequence[RunId]:
        # Through the index on status: the runs that have not ended are few beside those that have.
        query = select(runs.c.id).where(
            runs.c.status.in_(UNFINISHED_STATUSES), runs.c.org_id == org_id, runs.c.parent_run_id == run_id
        )
        return [RunId(row.id) for row in await self._conn.execute(query)]

    async def request_cancel(self, org_id: OrgId, run_id: RunId) -> None:
        await self._conn.execute(
            update(runs).where(runs.c.org_id == org_id, runs.c.id == run_id).values(cancel_requested=True)
        )

    async def save(self, run: Run, *, unless_cancel_requested: bool = False, hold: bool = False) -> None:
        # The lease check is part of the write (the guard of the unit's writes): no read first, and the row stays
        # locked until commit. Refused, a read says why.
        async def why_refused() -> None:
            held = (await self._conn.run(_HOLD, {"p_org": run.org_id, "p_id": run.id})).first()
            if held is None or held.lease != run.lease or not unless_cancel_requested:
                raise LeaseLost(f"run {run.id} was taken over by another process")
            raise CancelRequested(f"a cancel of run {run.id} was requested")

        guarded = _SAVE_UNLESS_CANCEL if unless_cancel_requested else _SAVE
        parameters = {
            "p_org": run.org_id,
            "p_id": run.id,
            "p_lease": run.lease,
            "p_executing": run.executes,
            **_values(run),
        }
        if hold:
            parameters["holder"] = PROCESS_KEY
        await self._conn.guard(guarded, parameters, why_refused)
        await record_new_steps(self._conn, run)  # its model calls' usage, with the steps that record it


class SqlRunEventRepository:
    def __init__(self, connection: UnitConnection) -> None:
        self._conn = connection

    async def add(self, event: RunEvent, org_id: OrgId) -> None:
        await self._conn.later(
            _EVENT_INSERT,
            {
                "run_id": event.run_id,
                "seq": event.seq,
                "org_id": org_id,
                "type": event.type.value,
                "data": event_data(event.payload),
                "created_at": event.created_at,
            },
        )

    async def list(self, org_id: OrgId, run_id: RunId, *, after_seq: int = 0) -> Sequence[RunEvent]:
        rows = await self._conn.run(_EVENTS, {"p_org": org_id, "p_run": run_id, "p_after": after_seq})
        return [
            RunEvent(
                run_id=RunId(row.run_id),
                seq=row.seq,
                payload=event_payload(RunEventType(row.type), row.data),
                created_at=utc_required(row.created_at),
            )
            for row in rows
        ]

    async def last_seq(self, run_id: RunId) -> int:
        value = (await self._conn.run(_LAST_SEQ, {"p_run": run_id})).scalar()
        return int(value or 0)
