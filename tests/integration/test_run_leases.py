"""Lease fencing on the database under test (SQLite, or PostgreSQL when THREADLINE_TEST_POSTGRES_URL is set):
a run taken over while its first holder still waits for the model keeps only the new holder's work; the first
holder's late answer writes nothing, and it stops without an error."""

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from dependency_injector import providers

from application.errors import LeaseLost
from application.ports.persistence import UnitOfWork
from application.runs.queueing import queue_run
from domain.agents import Agent
from domain.ids import RunId
from domain.runs import Run, RunStatus
from domain.threads import Thread
from infrastructure.container import Container
from infrastructure.llm import language_model
from tests import builders
from tests.conftest import as_port
from tests.fakes.openai_server import FakeOpenAI, TextReply, echo_text


@pytest.fixture
async def model(container: Container) -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(responder=echo_text) as fake:
        llm = language_model(openai_api_key="sk-test", openai_base_url=fake.base_url, max_retries=0, timeout_seconds=30)
        container.llm.override(providers.Object(llm))
        try:
            yield fake
        finally:
            container.llm.reset_override()
            await llm.aclose()


async def agent_and_thread(uow: UnitOfWork) -> tuple[Agent, Thread]:
    """An agent of a new organization and a thread of its, added with the caller's unit of work."""
    org = builders.organization()
    agent = builders.agent(org.id, model="gpt-test")
    thread = builders.thread(org.id, agent_id=agent.id)
    await uow.organizations.add(org)
    await uow.agents.add(agent)
    await uow.threads.add(thread)
    return agent, thread


async def queued_run(container: Container) -> tuple[Thread, Run]:
    """A queued run on a thread of its own, handed to no executor: the test executes it."""
    async with as_port(container.uow()) as uow:
        agent, thread = await agent_and_thread(uow)
        queued = await queue_run(
            uow, clock=container.clock(), ids=container.ids(), thread=thread, agent=agent, input="hello"
        )
        await uow.commit()
    return thread, queued.run


async def texts(container: Container, thread: Thread) -> list[tuple[str, str]]:
    async with as_port(container.uow()).read_only() as uow:
        listed = await uow.messages.list(thread.org_id, thread.id, limit=100, after_position=None)
    return [(m.role.value, m.text) for m in listed]


async def stored_events(container: Container, run: Run) -> list[str]:
    async with as_port(container.uow()).read_only() as uow:
        return [e.type.value for e in await uow.run_events.list(run.org_id, run.id)]


async def test_a_run_taken_over_while_its_holder_waits_for_the_model_keeps_the_new_holders_answer(
    container: Container, model: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    thread, run = await queued_run(container)
    held = model.hold()
    with caplog.at_level(logging.INFO):
        first = asyncio.create_task(container.execute_run().execute(run.org_id, RunId(run.id)))
        await asyncio.wait_for(held.received.wait(), 30)
        # Another process, thinking the first lost, takes the run over and finishes it.
        second = await container.execute_run().execute(run.org_id, run.id)
        assert second.status is RunStatus.COMPLETED
        held.release(TextReply("the late answer"))
        late = await asyncio.wait_for(first, 30)

    assert late.status is RunStatus.COMPLETED and late.lease == second.lease  # the run as the new holder left it
    assert await texts(container, thread) == [("user", "hello"), ("assistant", "You said: hello")]
    async with as_port(container.uow()).read_only() as uow:
        counted = await uow.threads.get(thread.org_id, thread.id)
    assert counted is not None and counted.message_count == 2  # nor counted a message of its own
    # The new holder announced that the run went on; the first one's late answer stored nothing.
    assert await stored_events(container, run) == ["run.created", "run.in_progress", "run.in_progress", "run.completed"]
    assert all(r.levelno < logging.ERROR for r in caplog.records)
    assert any("taken over" in r.getMessage() for r in caplog.records)


async def test_a_write_with_an_older_lease_is_refused_and_leaves_the_run_as_stored(container: Container) -> None:
    _thread, run = await queued_run(container)
    async with as_port(container.uow()) as uow:
        claimed = await uow.runs.claim(run.org_id, run.id)
        assert claimed is not None
        held = claimed.run
        await uow.commit()
    async with as_port(container.uow()) as uow:
        claimed = await uow.runs.claim(run.org_id, run.id)
        assert claimed is not None
        taken = claimed.run
        await uow.commit()
    assert taken.lease == held.lease + 1
    held.warn("a late write")
    with pytest.raises(LeaseLost):
        async with as_port(container.uow()) as uow:
            await uow.runs.save(held)
            await uow.commit()
    async with as_port(container.uow()).read_only() as uow:
        stored = await uow.runs.get(run.org_id, run.id)
    assert stored is not None and stored.warnings == () and stored.lease == taken.lease


async def test_a_cancel_requested_while_the_model_answers_wins_over_completing(
    container: Container, model: FakeOpenAI
) -> None:
    thread, run = await queued_run(container)
    held = model.hold()
    executing = asyncio.create_task(container.execute_run().execute(run.org_id, RunId(run.id)))
    await asyncio.wait_for(held.received.wait(), 30)
    async with as_port(container.uow()) as uow:  # another process asks, while this one waits for the model
        await uow.runs.request_cancel(run.org_id, run.id)
        await uow.commit()
    held.release(TextReply("an answer nobody wants"))
    ended = await asyncio.wait_for(executing, 30)

    assert ended.status is RunStatus.CANCELLED and ended.step_count == 1
    assert await texts(container, thread) == [("user", "hello"), ("assistant", "an answer nobody wants")]
    assert await stored_events(container, run) == ["run.created", "run.in_progress", "run.cancelled"]
    async with as_port(container.uow()).read_only() as uow:
        stored = await uow.runs.get(run.org_id, run.id)
    assert stored is not None and stored.status is RunStatus.CANCELLED and stored.step_count == 1


async def test_a_write_unless_cancelled_with_an_older_lease_is_refused(container: Container) -> None:
    _thread, run = await queued_run(container)
    async with as_port(container.uow()) as uow:
        claimed = await uow.runs.claim(run.org_id, run.id)
        assert claimed is not None
        held = claimed.run
        await uow.commit()
    async with as_port(container.uow()) as uow:
        await uow.runs.claim(run.org_id, run.id)
        await uow.runs.request_cancel(run.org_id, run.id)  # a cancel asked too: the lost lease is what is said
        await uow.commit()
    with pytest.raises(LeaseLost):
        async with as_port(container.uow()) as uow:
            await uow.runs.save(held, unless_cancel_requested=True)
            await uow.commit()


async def test_a_run_claimed_to_execute_comes_with_its_agent_and_its_lease_bumped(container: Container) -> None:
    _thread, run = await queued_run(container)
    async with as_port(container.uow()) as uow:
        claimed = await uow.runs.claim_to_execute(run.org_id, run.id)
        assert claimed is not None
        await uow.commit()
    async with as_port(container.uow()).read_only() as uow:
        agent = await uow.agents.get(run.org_id, run.agent_id)
        stored = await uow.runs.get(run.org_id, run.id)
    assert claimed.agent == agent and agent is not None
    assert stored is not None and claimed.run == stored and stored.lease == run.lease + 1
    assert claimed.last_event_seq == 1  # run.created
    async with as_port(container.uow()) as uow:
        other = builders.organization()
        await uow.organizations.add(other)
        assert await uow.runs.claim_to_execute(other.id, run.id) is None  # another organization's run
        await uow.agents.delete(run.org_id, run.agent_id)
        again = await uow.runs.claim_to_execute(run.org_id, run.id)
        await uow.commit()
    assert again is not None and again.agent is None and again.run.lease == run.lease + 2
