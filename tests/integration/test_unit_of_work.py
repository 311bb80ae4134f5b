import asyncio
import os
from dataclasses import replace
from uuid import uuid4

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from application.errors import Conflict, LeaseLost
from application.ports.persistence import UnfinishedRun, UnitOfWork
from domain.ids import MessageId
from domain.messages import Message, MessageRole, TextContent
from domain.organizations import Organization
from domain.run_events import RunEvent, RunInProgress
from domain.runs import Run, RunStatus, RunStep
from domain.threads import Thread
from domain.usage import Usage
from infrastructure.container import Container
from tests import builders
from tests.builders import NOW
from tests.conftest import as_port
from tests.databases import backend


async def test_nothing_is_written_without_commit(container: Container) -> None:
    org = builders.organization(slug="uncommitted-org")
    async with as_port(container.uow()) as uow:
        await uow.organizations.add(org)
    async with as_port(container.uow()) as uow:
        assert await uow.organizations.get(org.id) is None


async def test_an_error_rolls_the_whole_unit_back(container: Container) -> None:
    org = builders.organization(slug="rolled-back-org")
    try:
        async with as_port(container.uow()) as uow:
            await uow.organizations.add(org)
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    async with as_port(container.uow()) as uow:
        assert await uow.organizations.get_by_slug("rolled-back-org") is None


async def test_committed_work_is_visible_with_timezones(container: Container) -> None:
    org = builders.organization(slug="committed-org")
    async with as_port(container.uow()) as uow:
        await uow.organizations.add(org)
        await uow.commit()
    async with as_port(container.uow()) as uow:
        stored = await uow.organizations.get(org.id)
    assert stored == org
    assert stored is not None and stored.created_at.tzinfo is not None


async def test_one_unit_of_work_serves_concurrent_tasks(container: Container) -> None:
    """Parallel tool calls share their use cases: each task must get a transaction of its own."""

    uow = as_port(container.uow())
    orgs = [builders.organization(slug=f"concurrent-{i}") for i in range(5)]

    async def add(org: Organization) -> None:
        async with uow as tx:
            await tx.organizations.add(org)
            await asyncio.sleep(0)  # let the other tasks interleave inside their transactions
            await tx.commit()

    await asyncio.gather(*(add(o) for o in orgs))
    async with as_port(container.uow()) as tx:
        stored = [await tx.organizations.get(o.id) for o in orgs]
    assert stored == orgs


async def _stored_thread(container: Container) -> Thread:
    org = builders.organization()
    thread = builders.thread(org.id)
    async with as_port(container.uow()) as uow:
        await uow.organizations.add(org)
        await uow.threads.add(thread)
        await uow.commit()
    return thread


def _say(thread: Thread, text: str) -> Message:
    return thread.append(MessageRole.USER, (TextContent(text=text),), message_id=MessageId(uuid4()), now=NOW)


async def _append(uow: UnitOfWork, thread: Thread, texts: list[str]) -> list[Message]:
    """The messages added to the thread, and the thread saved with them counted."""
    added = [_say(thread, text) for text in texts]
    for message in added:
        await uow.messages.add(message)
    await uow.threads.save(thread)
    return added


async def test_messages_a_unit_adds_are_read_back_in_it_and_stored_in_order(container: Container) -> None:
    """Inserts may wait until the commit (on PostgreSQL, sent together as one statement): a read in the same unit
    of work still sees them, and the commit stores them all."""
    thread = await _stored_thread(container)
    async with as_port(container.uow()) as uow:
        added = await _append(uow, thread, [f"message {n}" for n in range(3)])
        read_in_unit = await uow.messages.list(thread.org_id, thread.id, limit=10, after_position=None)
        more = await _append(uow, thread, ["after the read"])
        await uow.commit()
    async with as_port(container.uow()) as uow:
        stored = await uow.messages.list(thread.org_id, thread.id, limit=10, after_position=None)
        stored_thread = await uow.threads.get(thread.org_id, thread.id)
    assert [m.id for m in read_in_unit] == [m.id for m in added]
    assert [(m.id, m.position) for m in stored] == [(m.id, m.position) for m in [*added, *more]]
    assert stored_thread is not None and stored_thread.message_count == 4


async def test_a_refused_insert_fails_the_commit_and_nothing_of_the_unit_is_stored(container: Container) -> None:
    thread = await _stored_thread(container)
    first = _say(thread, "first")
    async with as_port(container.uow()) as uow:
        await uow.messages.add(first)
        await uow.threads.save(thread)
        await uow.commit()
    with pytest.raises(Conflict):
        async with as_port(container.uow()) as uow:
            await uow.threads.save(replace(thread, title="renamed"))
            await uow.messages.add(_say(thread, "second"))
            await uow.messages.add(replace(first, position=first.position + 10))  # its id is taken
            await uow.commit()
    async with as_port(container.uow()) as uow:
        stored = await uow.messages.list(thread.org_id, thread.id, limit=10, after_position=None)
        stored_thread = await uow.threads.get(thread.org_id, thread.id)
    assert [m.id for m in stored] == [first.id]
    assert stored_thread is not None and stored_thread.title != "renamed"


async def test_inserts_of_a_unit_left_without_commit_are_not_stored(container: Container) -> None:
    thread = await _stored_thread(container)
    async with as_port(container.uow()) as uow:
        await uow.messages.add(_say(thread, "never committed"))
    async with as_port(container.uow()) as uow:  # the same connection may serve this one: nothing carried over
        await uow.threads.save(thread)
        await uow.commit()
    async with as_port(container.uow()) as uow:
        assert await uow.messages.list(thread.org_id, thread.id, limit=10, after_position=None) == []


async def test_a_unit_storing_a_long_conversation_at_once_stores_all_of_it(container: Container) -> None:
    """Past a few rows the kept inserts go one statement per table (a WITH that long would cost more than it
    saves): all of them, in order."""
    thread = await _stored_thread(container)
    async with as_port(container.uow()) as uow:
        added = await _append(uow, thread, [f"turn {n}" for n in range(40)])
        await uow.commit()
    async with as_port(container.uow()) as uow:
        stored = await uow.messages.list(thread.org_id, thread.id, limit=100, after_position=None)
    assert [(m.id, m.position, m.content) for m in stored] == [(m.id, m.position, m.content) for m in added]


async def _stored_run(container: Container, thread: Thread) -> Run:
    agent = builders.agent(thread.org_id)
    run = builders.run(thread.org_id, thread.id, agent.id)
    async with as_port(container.uow()) as uow:
        await uow.agents.add(agent)
        await uow.runs.add(run)
        await uow.commit()
    return run


async def test_a_step_whose_unit_was_rolled_back_reaches_the_usage_ledger_with_the_next_save(
    container: Container,
) -> None:
    """A run saved in a unit of work that does not commit (its step's usage row with it), then saved again, and
    again as if the step were not in the ledger: the ledger counts the step once."""
    thread = await _stored_thread(container)
    run = await _stored_run(container, thread)
    run.start(NOW)
    run.record_step(
        RunStep(
            number=1,
            model="gpt-test",
            usage=Usage(input_tokens=7, output_tokens=3),
            finish_reason="stop",
            started_at=NOW,
            completed_at=NOW,
        ),
        NOW,
    )
    async with as_port(container.uow()) as uow:
        await uow.runs.save(run)  # rolled back: nothing of it stored
    async with as_port(container.uow()) as uow:
        await uow.runs.save(run)
        await uow.commit()
    async with as_port(container.uow()) as uow:
        await uow.runs.save(run)  # nothing new to add
        await uow.commit()
    run.steps_in_ledger = 0  # as after a COMMIT whose answer was lost: stored, though counted out
    async with as_port(container.uow()) as uow:
        await uow.runs.save(run)
        await uow.commit()
        (line,) = await uow.usage.totals(thread.org_id, first_day=NOW.date(), last_day=NOW.date(), group_by=None)
    assert (line.model_calls, line.usage.input_tokens, line.usage.output_tokens) == (1, 7, 3)


async def _claimed_twice(container: Container, thread: Thread) -> Run:
    """A run of the thread, as its first holder has it after another process claimed it too."""
    run = await _stored_run(container, thread)
    held = None
    for _ in range(2):
        async with as_port(container.uow()) as uow:
            claimed = await uow.runs.claim(run.org_id, run.id)
            await uow.commit()
        held = held or (claimed.run if claimed else None)
    assert held is not None
    return held


def _with_step(run: Run, model: str) -> Run:
    run.start(NOW)
    step = RunStep(
        number=1,
        model=model,
        usage=Usage(input_tokens=7, output_tokens=3),
        finish_reason="stop",
        started_at=NOW,
        completed_at=NOW,
    )
    run.record_step(step, NOW)
    return run


async def _nothing_of_the_step(container: Container, thread: Thread, run: Run) -> None:
    async with as_port(container.uow()).read_only() as uow:
        messages = await uow.messages.list(thread.org_id, thread.id, limit=10, after_position=None)
        stored_thread = await uow.threads.get(thread.org_id, thread.id)
        events = await uow.run_events.list(run.org_id, run.id)
        usage = await uow.usage.totals(thread.org_id, first_day=NOW.date(), last_day=NOW.date(), group_by=None)
        stored_run = await uow.runs.get(run.org_id, run.id)
    assert messages == [] and events == []
    assert stored_thread is not None and stored_thread.message_count == 0
    assert [line.model_calls for line in usage] in ([], [0])
    assert stored_run is not None and stored_run.step_count == 0


async def test_a_step_refused_by_its_runs_lease_stores_none_of_its_writes(container: Container) -> None:
    """A step's writes wait for the run's update checked against its lease (on PostgreSQL, one statement, each write
    gated on that update): a holder that lost the run writes no message, event, count or usage."""
    thread = await _stored_thread(container)
    held = _with_step(await _claimed_twice(container, thread), "gpt-test")
    with pytest.raises(LeaseLost):
        async with as_port(container.uow()) as uow:
            await uow.runs.save(held)
            message = _say(thread, "a late answer")
            await uow.threads.counted(thread.org_id, thread.id, message.position, NOW)
            await uow.messages.add(message)
            await uow.run_events.add(
                RunEvent(run_id=held.id, seq=9, payload=RunInProgress.of(held), created_at=NOW), held.org_id
            )
            await uow.commit()
    await _nothing_of_the_step(container, thread, held)


@pytest.mark.skipif(not os.environ.get("THREADLINE_TEST_POSTGRES_URL"), reason="SQLite keeps strings of any length")
async def test_a_value_too_long_for_its_column_fails_the_step_instead_of_being_cut(container: Container) -> None:
    thread = await _stored_thread(container)
    run = await _stored_run(container, thread)
    _with_step(run, "m" * 250)  # the usage ledger keeps a model's name in 200 characters
    with pytest.raises(DBAPIError):  # value too long (not cut to fit)
        async with as_port(container.uow()) as uow:
            await uow.runs.save(run)
            await uow.commit()
    await _nothing_of_the_step(container, thread, run)


async def test_a_thread_read_to_run_comes_with_the_agent_asked_for_and_its_unfinished_run(
    container: Container,
) -> None:
    org, other = builders.organization(), builders.organization()
    default, named = builders.agent(org.id, slug="default"), builders.agent(org.id, slug="named")
    foreign = builders.agent(other.id, slug="foreign")
    thread, bare = builders.thread(org.id, agent_id=default.id), builders.thread(org.id)
    ended = builders.run(org.id, thread.id, default.id)
    ended.cancel(NOW)
    waiting = builders.run(org.id, thread.id, default.id)
    async with as_port(container.uow()) as uow:
        for organization in (org, other):
            await uow.organizations.add(organization)
        for agent in (default, named, foreign):
            await uow.agents.add(agent)
        for added in (thread, bare):
            await uow.threads.add(added)
        for run in (ended, waiting):
            await uow.runs.add(run)
        await uow.commit()

    async with as_port(container.uow()) as uow:
        own = await uow.threads.get_to_run(org.id, thread.id, None)
        asked = await uow.threads.get_to_run(org.id, thread.id, named.id)
        elsewhere = await uow.threads.get_to_run(org.id, thread.id, foreign.id)
        agentless = await uow.threads.get_to_run(org.id, bare.id, None)
        not_ours = await uow.threads.get_to_run(other.id, thread.id, None)
    assert own is not None and own.thread == thread and own.agent == default
    assert own.unfinished == UnfinishedRun(id=waiting.id, status=RunStatus.QUEUED)  # not the one that ended
    assert asked is not None and asked.thread == thread and asked.agent == named  # the thread keeps its agent
    assert elsewhere is not None and elsewhere.thread == thread and elsewhere.agent is None
    assert agentless is not None and agentless.thread == bare and agentless.agent is None
    assert agentless.unfinished is None
    assert not_ours is None


WAITING_FOR_A_ROW_LOCK = text("SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted")


@pytest.mark.skipif(backend() != "postgresql", reason="SQLite has one writer at a time")
async def test_a_thread_read_to_run_after_waiting_for_another_creation_comes_with_its_run(
    container: Container,
) -> None:
    """Two creations on one thread: the second waits for the thread's lock, and its statement's snapshot is older
    than the first one's commit. It still reads the first one's run (and refuses to create another)."""
    org = builders.organization()
    agent = builders.agent(org.id)
    thread = builders.thread(org.id, agent_id=agent.id)
    async with as_port(container.uow()) as uow:
        await uow.organizations.add(org)
        await uow.agents.add(agent)
        await uow.threads.add(thread)
        await uow.commit()
    first_run = builders.run(org.id, thread.id, agent.id)
    first_holds, release_first = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with as_port(container.uow()) as uow:
            found = await uow.threads.get_to_run(org.id, thread.id, None)
            assert found is not None and found.unfinished is None
            await uow.threads.save(found.thread)  # as a run's creation writes its thread
            await uow.runs.add(first_run)
            first_holds.set()
            await release_first.wait()
            await uow.commit()

    async def second() -> UnfinishedRun | None:
        async with as_port(container.uow()) as uow:
            found = await uow.threads.get_to_run(org.id, thread.id, None)
            assert found is not None
            return found.unfinished

    creating = asyncio.create_task(first())
    await first_holds.wait()
    waiting = asyncio.create_task(second())
    async with asyncio.timeout(10):  # the second creation is queued behind the first one's lock on the thread
        while True:
            async with container.database().engine.connect() as conn:
                if (await conn.execute(WAITING_FOR_A_ROW_LOCK)).scalar_one() >= 1:
                    break
            await asyncio.sleep(0.05)
    release_first.set()
    await creating
    assert await waiting == UnfinishedRun(id=first_run.id, status=RunStatus.QUEUED)
