"""The statements a run uses at every step go straight to the driver (persistence/prepared.py), on the database
under test: what they store and read back, the errors they raise and the statement events they announce are
those of the same statements through SQLAlchemy."""

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.dialects import sqlite

from application.errors import IdempotencyConflict, ThreadBusy
from domain.runs import ClientTool, RunStep, StepToolCall
from domain.usage import Usage
from infrastructure.container import Container
from infrastructure.persistence.prepared import Prepared
from infrastructure.persistence.tables import runs
from tests import builders
from tests.builders import NOW
from tests.conftest import as_port


async def _stored(container: Container, **run_fields: Any) -> tuple[Any, Any]:
    org = builders.organization()
    agent = builders.agent(org.id)
    thread = builders.thread(org.id, agent_id=agent.id)
    run = builders.run(org.id, thread.id, agent.id, **run_fields)
    async with as_port(container.uow()) as uow:
        await uow.organizations.add(org)
        await uow.agents.add(agent)
        await uow.threads.add(thread)
        await uow.runs.add(run)
        await uow.commit()
    return thread, run


async def test_a_run_read_back_is_the_run_stored(container: Container) -> None:
    """Times with their zone, JSON columns, identifiers: as stored, through the prepared statements' own
    conversions of values and rows."""
    _, run = await _stored(container, client_tools=(ClientTool(name="pick", description="Pick", parameters={}),))
    run.start(NOW)
    run.record_step(
        RunStep(
            number=1,
            model="gpt-test",
            usage=Usage(input_tokens=5, output_tokens=2),
            finish_reason="tool_calls",
            started_at=NOW,
            completed_at=NOW + timedelta(seconds=1),
            tool_calls=(
                StepToolCall(id="call-1", name="pick", type="client", pending=True),
                StepToolCall(id="call-2", name="memo__lookup", type="mcp", may_call_again=True),
            ),
        ),
        NOW + timedelta(seconds=1),
    )
    async with as_port(container.uow()) as uow:
        await uow.runs.save(run)
        await uow.commit()
    async with as_port(container.uow()) as uow:
        stored = await uow.runs.get(run.org_id, run.id)
    assert stored is not None
    assert (stored.status, stored.steps, stored.client_tools, stored.usage) == (
        run.status,
        run.steps,
        run.client_tools,
        run.usage,
    )
    assert stored.started_at == NOW and stored.started_at.tzinfo is not None


async def test_a_refused_prepared_insert_is_the_error_it_means(container: Container) -> None:
    _, first = await _stored(container, idempotency_key="once")
    other = builders.thread(first.org_id, agent_id=first.agent_id)
    again = builders.run(first.org_id, other.id, first.agent_id, idempotency_key="once")
    with pytest.raises(IdempotencyConflict):
        async with as_port(container.uow()) as uow:
            await uow.threads.add(other)
            await uow.runs.add(again)
            await uow.commit()


async def test_a_thread_holds_one_unfinished_run_whatever_writes_it(container: Container) -> None:
    """The database refuses a second unfinished run in a thread (ThreadBusy, a 409), even written past the
    check that creating a run makes; once the first has ended, the thread takes another."""
    thread, first = await _stored(container)
    second = builders.run(first.org_id, thread.id, first.agent_id)
    with pytest.raises(ThreadBusy):
        async with as_port(container.uow()) as uow:
            await uow.runs.add(second)
            await uow.commit()
    first.cancel(NOW)
    async with as_port(container.uow()) as uow:
        await uow.runs.save(first)
        await uow.runs.add(second)
        await uow.commit()
    async with as_port(container.uow()) as uow:
        stored = await uow.runs.get(second.org_id, second.id)
    assert stored is not None and stored.status.value == "queued"


async def test_what_listens_to_statements_sees_the_prepared_ones(container: Container) -> None:
    """bench/statements.py counts a run's statements by SQLAlchemy's events, and the catalog watcher
    (execution/local_catalog_changes.py) reads the statements executed."""
    _, run = await _stored(container)
    sent: list[tuple[str, object]] = []
    executed: list[object] = []

    def _sent(_conn: Any, _cursor: Any, statement: str, _parameters: Any, context: Any, _many: bool) -> None:
        sent.append((statement, context))

    def _executed(_conn: Any, statement: Any, *_: Any) -> None:
        executed.append(statement)

    engine = container.database().engine.sync_engine
    event.listen(engine, "before_cursor_execute", _sent)
    event.listen(engine, "after_execute", _executed)
    try:
        async with as_port(container.uow()) as uow:
            assert await uow.runs.get(run.org_id, run.id) is not None
    finally:
        event.remove(engine, "before_cursor_execute", _sent)
        event.remove(engine, "after_execute", _executed)
    (read,) = [(sql, context) for sql, context in sent if sql.startswith("SELECT") and "FROM runs" in sql]
    assert read[1] is None  # no SQLAlchemy execution context: sent straight to the driver
    assert [statement for statement in executed if "runs" in str(statement)]


def test_a_statement_whose_values_do_not_all_come_from_its_parameters_cannot_be_prepared() -> None:
    expanding = Prepared(select(runs).where(runs.c.status.in_(["queued", "in_progress"])))
    with pytest.raises(ValueError, match="values all come from its parameters"):
        expanding.compiled(sqlite.dialect(), ())
