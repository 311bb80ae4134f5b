"""Worker mode's gaps, on PostgreSQL: a run taken over from a lost worker goes back to the queue fenced off
from that worker (which may be silent rather than dead); a process whose link to the others was down still
gives its followers the events stored meanwhile; a follower that reads from storage an event stored after text
deltas still on their way gets the deltas; a run is stored queued only with its job; an admission holding its
organization's lock does not hold up the organization's writes; a job queue that fails while the database
answers makes the API not ready (503), not a server error."""

import asyncio
import itertools
import secrets
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import procrastinate
import psycopg
import psycopg_pool
import pytest
from procrastinate.exceptions import ConnectorException
from procrastinate.job_context import AbortReason
from procrastinate.jobs import Job, Status
from sqlalchemy import text

from application.caller import Caller
from application.errors import LeaseLost, StorageUnavailable
from application.runs.events import RunEventStream
from application.runs.follow_run import FollowRun
from application.runs.queueing import Queued, queue_run
from domain.elicitation import Elicitation
from domain.ids import MessageId, OrgId, RunId
from domain.run_events import MessageDelta, RunEvent, RunInProgress
from domain.runs import PendingToolCall, Run, RunStatus
from infrastructure.container import Container
from infrastructure.execution import job_queue, run_queue
from infrastructure.execution.pg_event_bus import PostgresRunEventBus
from infrastructure.execution.pg_listener import libpq_dsn
from infrastructure.limits.admission import Admission, RunAdmission
from infrastructure.persistence import run_holders
from infrastructure.persistence.engine import Database
from infrastructure.persistence.run_holders import SILENCE_OF_THE_STRANDED
from infrastructure.persistence.unit_of_work import SqlAlchemyUnitOfWork
from infrastructure.settings import Settings
from tests import builders
from tests.conftest import as_port
from tests.databases import backend, fresh_database, off_the_loop
from tests.integration.test_run_leases import agent_and_thread, queued_run

pytestmark = pytest.mark.skipif(
    backend() != "postgresql",
    reason="the job queue and LISTEN/NOTIFY need PostgreSQL (set THREADLINE_TEST_POSTGRES_URL)",
)


async def test_a_run_taken_over_from_a_lost_worker_refuses_that_workers_late_writes(
    container: Container, settings: Settings
) -> None:
    _thread, run = await queued_run(container)
    async with as_port(container.uow()) as uow:  # the worker that is lost took the run
        claimed = await uow.runs.claim(run.org_id, run.id)
        assert claimed is not None
        held = claimed.run
        await uow.commit()
    async with job_queue.opened(settings.database_url, 2, 4) as app:
        # Its job, as a worker that stopped sending heartbeats left it (scheduled late: no live worker takes it).
        job = app.configure_task(run_queue.TASK, lock=str(run.id), queueing_lock=str(run.id), schedule_in={"hours": 1})
        job_id = await job.defer_async(org_id=str(run.org_id), run_id=str(run.id))
        await app.connector.execute_query_async(
            "UPDATE procrastinate_jobs SET status = 'doing' WHERE id = %(id)s", id=job_id
        )
        context: Any = SimpleNamespace(app=app, additional_context={job_queue.LOST_SECONDS: 4})
        await job_queue._take_over_lost_runs(context, 0)
        # The lost worker, back, finishes its job as its run stopped (LeaseLost): that leaves the run's new job be.
        lost = Job(id=job_id, queue=run_queue.QUEUE, lock=str(run.id), queueing_lock=None, task_name=run_queue.TASK)
        with pytest.raises(ConnectorException):
            await app.job_manager.finish_job(lost, status=Status.SUCCEEDED, delete_job=True)
        # Or it tries its job again (the run handed back, or not started): that too leaves the run's new job be.
        await app.job_manager.retry_job(lost, retry_at=datetime.now(UTC))
        jobs = await app.connector.execute_query_all_async(
            "SELECT id, status FROM procrastinate_jobs WHERE lock = %(lock)s ORDER BY id", lock=str(run.id)
        )
        await app.connector.execute_query_async(
            "DELETE FROM procrastinate_jobs WHERE lock = %(lock)s", lock=str(run.id)
        )
    assert [row["status"] for row in jobs] == ["failed", "todo"]  # back in the queue as a job of its own
    held.start(held.created_at)
    with pytest.raises(LeaseLost):  # what the lost worker still writes, before anyone took the run, is refused
        async with as_port(container.uow()) as uow:
            await uow.runs.save(held)
            await uow.commit()
    async with as_port(container.uow()).read_only() as uow:
        stored = await uow.runs.get(run.org_id, run.id)
    assert stored is not None and stored.status is RunStatus.QUEUED


async def test_a_run_with_no_job_ends_only_once_this_worker_too_saw_its_process_silent_for_the_lost_time(
    container: Container, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database's clock says the process that executes a run with no job (asked for over MCP) has been silent for
    an hour, as a forward step of that clock would say of every live process at once. The run is taken for stranded
    only once this worker has seen that process's row unchanged for the lost time on its own clock; a process heard
    from meanwhile starts over."""
    _thread, run = await queued_run(container)
    holder, lost = secrets.randbelow(2**31 - 2) + 1, 4.0
    now = [1000.0]
    monkeypatch.setattr(run_holders.WITNESS, "clock", lambda: now[0])
    async with container.database().engine.begin() as conn:
        await conn.execute(text("UPDATE runs SET holder = :holder WHERE id = :run"), {"holder": holder, "run": run.id})
        await conn.execute(
            text("INSERT INTO run_holders (holder, seen_at) VALUES (:holder, now() - interval '1 hour')"),
            {"holder": holder},
        )

    async def stranded() -> list[RunId]:
        async with as_port(SqlAlchemyUnitOfWork(container.database(), queued_runs=True)).read_only() as uow:
            return [r.id for r in await uow.runs.stranded(SILENCE_OF_THE_STRANDED * lost, 500)]

    async def heard_from() -> None:  # its row written again (the database's clock still says it is silent)
        async with container.database().engine.begin() as conn:
            await conn.execute(
                text("UPDATE run_holders SET seen_at = now() - interval '30 minutes' WHERE holder = :holder"),
                {"holder": holder},
            )

    try:
        seen = [run.id in await stranded()]  # first seen silent
        now[0] += lost - 0.1
        seen.append(run.id in await stranded())
        await heard_from()
        now[0] += 0.2
        seen.append(run.id in await stranded())  # starts over
        now[0] += lost + 0.1
        seen.append(run.id in await stranded())
        async with as_port(SqlAlchemyUnitOfWork(container.database(), queued_runs=True)) as uow:
            claimed = await uow.runs.claim_stranded(run, SILENCE_OF_THE_STRANDED * lost)
            await uow.commit()
    finally:
        await _left_behind(container, None, run)
        async with container.database().engine.begin() as conn:
            await conn.execute(text("DELETE FROM run_holders WHERE holder = :holder"), {"holder": holder})
        run_holders.WITNESS.saw([], patience=lost)  # what it saw on the test's clock is forgotten
    assert seen == [False, False, False, True]
    assert claimed is not None and claimed.run.id == run.id


async def test_events_stored_while_the_listening_connection_was_down_reach_the_followers(
    container: Container, settings: Settings
) -> None:
    _thread, run = await queued_run(container)  # its run.created event is stored
    bus = PostgresRunEventBus(settings.database_url)
    connect, back, listening = bus._notices._connected, asyncio.Event(), list[int]()

    async def held_back() -> psycopg.AsyncConnection[Any]:
        if listening:  # a reconnection: it waits until the test lets it
            await back.wait()
        listener = await connect()
        listening.append(listener.info.backend_pid)
        return listener

    bus._notices._connected = held_back  # type: ignore[method-assign]
    await bus.start()
    try:
        async with (
            bus.subscribe(run.id) as follower,
            await psycopg.AsyncConnection.connect(libpq_dsn(settings.database_url), autocommit=True) as admin,
        ):
            await admin.execute("SELECT pg_terminate_backend(%s)", (listening[0],))
            later = RunEvent(run_id=run.id, seq=2, payload=RunInProgress.of(run), created_at=datetime.now(UTC))
            async with as_port(container.uow()) as uow:  # stored (and notified) while no one here listens
                await uow.run_events.add(later, run.org_id)
                await uow.commit()
            back.set()
            received = [await asyncio.wait_for(follower.next(), 10) for _ in range(2)]
    finally:
        await bus.close()
    assert [(e.seq, e.type.value) for e in received] == [(1, "run.created"), (2, "run.in_progress")]


async def test_a_follower_that_reads_an_event_stored_after_deltas_on_their_way_gets_the_deltas_first(
    container: Container, settings: Settings
) -> None:
    """The worker sends a run's text deltas, then stores its next event; the notifications reach the follower's
    process late (after it read that event from storage), yet the follower gets every event, in order."""
    _thread, run = await queued_run(container)  # run.created, stored
    worker, api = PostgresRunEventBus(settings.database_url), PostgresRunEventBus(settings.database_url)
    await worker.start()
    await api.start()
    loop, receive = asyncio.get_running_loop(), api._received
    # Every notification reaches the API process 1 s late, in the order sent.
    api._received = lambda pid, text: loop.call_later(1, receive, pid, text)  # type: ignore[method-assign, assignment]
    try:
        events = RunEventStream(run.org_id, run.id, 1, worker, container.clock())
        text = MessageId(uuid.uuid4())
        await events.publish(*(events.make(MessageDelta(message_id=text, text=word)) for word in ("He", "llo")))
        async with as_port(container.uow()) as uow:
            stored = await events.record(uow, RunInProgress.of(run))
            await uow.commit()
        await events.publish(stored)
        follow = FollowRun(as_port(container.uow()), api)
        async with await follow.execute(Caller.operator(run.org_id), run.id) as follower:
            history = [(e.seq, e.type.value) for e in follower.history]
    finally:
        await api.close()
        await worker.close()
        await _left_behind(container, None, run)
    assert history == [(1, "run.created"), (2, "message.delta"), (3, "message.delta"), (4, "run.in_progress")]


async def test_a_run_whose_cancel_cannot_be_stored_gets_a_job_of_its_own_again(
    container: Container, settings: Settings
) -> None:
    """The worker stops the run at the user's cancel, but the database does not answer: the aborted job is not
    retried by procrastinate, so a new one, due shortly, ends the run as its stored cancel request says."""
    _thread, run = await queued_run(container)
    started = asyncio.Event()

    async def execute(org_id: Any, run_id: Any, *, hand_back_on_outage: bool = False) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            assert hand_back_on_outage
            raise StorageUnavailable("the database is unavailable; try again shortly") from None

    async with job_queue.opened(settings.database_url, 2, 4) as app:
        job = Job(id=1, queue=run_queue.QUEUE, lock=str(run.id), queueing_lock=str(run.id), task_name=run_queue.TASK)
        context: Any = SimpleNamespace(app=app, job=job, abort_reason=lambda: AbortReason.USER_REQUEST)
        executing = asyncio.create_task(job_queue.WorkerRuns(execute).execute(context, run.org_id, run.id))
        await started.wait()
        executing.cancel()  # procrastinate aborts the job
        with pytest.raises(asyncio.CancelledError):
            await executing
        rows = await app.connector.execute_query_all_async(
            "SELECT status, scheduled_at FROM procrastinate_jobs WHERE queueing_lock = %(run)s", run=str(run.id)
        )
        await _left_behind(container, app, run)
    assert [row["status"] for row in rows] == ["todo"]
    assert rows[0]["scheduled_at"] > datetime.now(UTC)


async def test_a_run_is_stored_queued_only_with_its_job_for_the_workers(
    container: Container, settings: Settings
) -> None:
    """Worker mode queues a run's job in the transaction that stores the run: no process that stops in between
    (or job queue that fails to answer) leaves a run queued that no worker would ever take; and a run has one job
    waiting at most."""
    async with as_port(container.uow()) as uow:
        agent, thread = await agent_and_thread(uow)
        await uow.commit()
    org_id = thread.org_id
    database = Database(settings.database_url, pool_size=2)
    try:
        worker_mode = as_port(SqlAlchemyUnitOfWork(database, queued_runs=True))

        async def queued(*, commit: bool) -> Queued:
            async with worker_mode as uow:
                stored = await uow.threads.get(org_id, thread.id, for_update=True)
                assert stored is not None
                queued = await queue_run(
                    uow,
                    clock=container.clock(),
                    ids=container.ids(),
                    thread=stored,
                    agent=agent,
                    input="hello",
                    to_executor=True,
                )
                if commit:
                    await uow.commit()
            return queued

        abandoned = await queued(commit=False)
        kept = await queued(commit=True)
        # Its job queued again while it still waits (a resume racing a job handed back): the unit is not refused,
        # and the run keeps one job.
        async with worker_mode as uow:
            run = await uow.runs.get(org_id, kept.run.id, for_update=True)
            assert run is not None
            await uow.runs.save(run)
            assert await uow.run_jobs.add(org_id, run.id)
            await uow.commit()
    finally:
        await database.dispose()
    assert kept.submitted  # the caller does not submit it again
    async with job_queue.opened(settings.database_url, 2, 4) as app:
        jobs = await app.connector.execute_query_all_async(
            "SELECT task_name, queue_name, lock, queueing_lock, args, status FROM procrastinate_jobs"
            " WHERE lock IN (%(kept)s, %(abandoned)s)",
            kept=str(kept.run.id),
            abandoned=str(abandoned.run.id),
        )
        await _left_behind(container, app, kept.run)
    run_id = str(kept.run.id)
    assert jobs == [
        {
            "task_name": run_queue.TASK,
            "queue_name": run_queue.QUEUE,
            "lock": run_id,
            "queueing_lock": run_id,
            "args": {"org_id": str(org_id), "run_id": run_id},
            "status": "todo",
        }
    ]


async def _left_behind(container: Container, app: Any | None, *made: Run) -> None:
    """A test's runs cancelled and their jobs deleted (`app`: the job queue, where they have jobs): the suite's
    worker, in queue mode, would take such a job up later and execute its run with the model of the test then
    running."""
    if app is not None:
        locks = [str(run.id) for run in made]
        await app.connector.execute_query_async(
            "DELETE FROM procrastinate_jobs WHERE lock = ANY(%(locks)s)", locks=locks
        )
    async with as_port(container.uow()) as uow:
        for run in made:
            left = await uow.runs.get(run.org_id, run.id)
            if left is not None and not left.status.is_terminal:
                left.cancel(datetime.now(UTC))
                await uow.runs.save(left)
        await uow.commit()


async def _job_statuses(app: Any, locks: list[str]) -> dict[str, str]:
    rows = await app.connector.execute_query_all_async(
        "SELECT lock, status FROM procrastinate_jobs WHERE lock = ANY(%(locks)s)", locks=locks
    )
    return {row["lock"]: row["status"] for row in rows}


async def test_a_runs_job_that_succeeded_is_deleted_as_it_ends_and_one_that_failed_is_kept(settings: Settings) -> None:
    """The queue's tables do not grow with every run executed: the run's row is its record."""
    queue = f"test-{uuid.uuid4().hex[:8]}"  # no other worker takes these jobs
    done, broken = str(uuid.uuid4()), str(uuid.uuid4())
    org_id = str(uuid.uuid4())

    async def execute(org_id: OrgId, run_id: RunId, *, hand_back_on_outage: bool = False) -> None:
        if str(run_id) == broken:
            raise RuntimeError("a bug")

    async with job_queue.opened(settings.database_url, 2, 4) as app:
        for run_id in (done, broken):
            task = app.configure_task(run_queue.TASK, queue=queue, lock=run_id, queueing_lock=run_id)
            await task.defer_async(org_id=org_id, run_id=run_id)
        await job_queue.work(
            job_queue.QueueRunExecutor(app, 4),
            job_queue.WorkerRuns(execute),
            queues=[queue],
            concurrency=1,
            grace_seconds=1,
            lost_seconds=4,
            signals=False,
            wait=False,  # until no job is due
        )
        statuses = await _job_statuses(app, [done, broken])
        # What its periodic deferrer queued on the runs' queue meanwhile is left to no one.
        await app.connector.execute_query_async(
            "DELETE FROM procrastinate_jobs WHERE lock = ANY(%(locks)s)"
            " OR (task_name = ANY(%(periodic)s) AND status = 'todo')",
            locks=[done, broken],
            periodic=[job_queue.RECOVER, job_queue.CLEAN_UP],
        )
    assert statuses == {broken: "failed"}


async def test_jobs_that_ended_long_ago_are_deleted_by_a_periodic_task(settings: Settings) -> None:
    old, recent = str(uuid.uuid4()), str(uuid.uuid4())
    async with job_queue.opened(settings.database_url, 2, 4) as app:
        for lock in (old, recent):
            # Due in an hour: no worker takes it meanwhile; then failed, as a worker would have left it.
            task = app.configure_task(run_queue.TASK, lock=lock, queueing_lock=lock, schedule_in={"hours": 1})
            job_id = await task.defer_async(org_id=str(uuid.uuid4()), run_id=lock)
            await app.connector.execute_query_async(
                "UPDATE procrastinate_jobs SET status = 'failed' WHERE id = %(id)s", id=job_id
            )
        kept = job_queue.FINISHED_JOBS_KEPT_HOURS
        for lock, hours_ago in ((old, kept + 1), (recent, kept - 1)):  # when each ended
            await app.connector.execute_query_async(
                "UPDATE procrastinate_events SET at = now() - make_interval(hours => %(hours)s)"
                " WHERE job_id = (SELECT id FROM procrastinate_jobs WHERE lock = %(lock)s)",
                hours=hours_ago,
                lock=lock,
            )
        periodic = {p.task.name: p.cron for p in app.periodic_registry.periodic_tasks.values()}
        try:
            assert periodic[job_queue.CLEAN_UP] == job_queue.CLEAN_UP_CRON

            await app.tasks[job_queue.CLEAN_UP].func(SimpleNamespace(app=app), timestamp=0)

            assert await _job_statuses(app, [old, recent]) == {recent: "failed"}
        finally:
            await app.connector.execute_query_async(
                "DELETE FROM procrastinate_jobs WHERE lock = ANY(%(locks)s)", locks=[old, recent]
            )


async def _three_runs_one_slot(container: Container) -> list[Run]:
    """Three queued runs of one organization, on threads of their own (the organization's limit is set later)."""
    async with as_port(container.uow()) as uow:
        agent, first = await agent_and_thread(uow)
        threads = [first, *(builders.thread(first.org_id, agent_id=agent.id) for _ in range(2))]
        for thread in threads[1:]:
            await uow.threads.add(thread)
        runs = [
            (await queue_run(uow, clock=container.clock(), ids=container.ids(), thread=t, agent=agent, input="hi")).run
            for t in threads
        ]
        await uow.commit()
    return runs


async def _waiting_in_line(app: Any, queue: str, runs: list[Run]) -> None:
    """The organization may execute one run at a time; the runs were created in this order, seconds apart; all but
    the first were refused before, and wait in the queue for a slot (their jobs, in `queue`, due later unless
    woken)."""
    sql = app.connector.execute_query_async
    await sql("UPDATE organizations SET max_concurrent_runs = 1 WHERE id = %(org)s", org=runs[0].org_id)
    for age, run in zip((30, 20, 10), runs, strict=True):
        await sql(
            "UPDATE runs SET created_at = now() - make_interval(secs => %(age)s) WHERE id = %(run)s",
            age=age,
            run=run.id,
        )
        if run is not runs[0]:
            task = app.configure_task(
                run_queue.TASK, queue=queue, lock=str(run.id), queueing_lock=str(run.id), schedule_in={"hours": 1}
            )
            await task.defer_async(**run_queue.run_job_args(run.org_id, run.id))


async def _due(app: Any, run: Run) -> bool:
    [row] = await app.connector.execute_query_all_async(
        "SELECT scheduled_at <= now() AS due FROM procrastinate_jobs WHERE queueing_lock = %(run)s", run=str(run.id)
    )
    return bool(row["due"])


async def test_a_run_is_admitted_while_its_organization_has_a_free_slot_and_older_waiting_runs_go_first(
    container: Container, settings: Settings
) -> None:
    """Fair share (the organization may execute one run at a time): the oldest run is admitted; a newer one is
    refused while the slot is held, and refused again once it is free because an older run waits for it, which
    is woken (its job made due); that one is then admitted."""
    runs = await _three_runs_one_slot(container)
    org_id, (oldest, older, newest) = runs[0].org_id, runs
    admission = RunAdmission(container.database(), default_limit=10)
    queue = f"test-{uuid.uuid4().hex[:8]}"  # no worker takes these jobs
    async with job_queue.opened(settings.database_url, 2, 4) as app:
        sql = app.connector.execute_query_async
        await _waiting_in_line(app, queue, runs)

        try:
            first_try = [await admission.admit(org_id, oldest.id), await admission.admit(org_id, newest.id)]
            # The oldest ends and gives its slot back (as a worker's release does, without waking anyone).
            await sql("UPDATE runs SET status = 'completed', admitted_at = NULL WHERE id = %(run)s", run=oldest.id)
            newest_again = await admission.admit(org_id, newest.id)
            woken = (await _due(app, older), await _due(app, newest))
            older_admitted = await admission.admit(org_id, older.id)
            ended = await admission.admit(org_id, oldest.id)
        finally:
            await sql("DELETE FROM procrastinate_jobs WHERE queue_name = %(queue)s", queue=queue)
    assert [a.admitted for a in first_try] == [True, False]
    assert not newest_again.admitted
    assert woken == (True, False)  # the older run's job is due now; the newer one's still later
    assert older_admitted.admitted and older_admitted.request_id == older.request_id
    assert ended.admitted  # nothing to execute: its execution says so


async def test_a_run_going_on_after_its_clients_answers_waits_its_turn_for_a_slot_and_its_cancel_needs_none(
    container: Container, settings: Settings
) -> None:
    """A run in progress again after its client's answers waits for a slot as a queued one does: a slot given back
    wakes it (its job made due), and newer runs wait behind it. Cancelled while it waits, its job is made due at
    once and it is admitted without taking a slot (it executes only to record its end)."""
    runs = await _three_runs_one_slot(container)
    org_id, (holding, resumed, newest) = runs[0].org_id, runs
    admission = RunAdmission(container.database(), default_limit=10)
    queue = f"test-{uuid.uuid4().hex[:8]}"  # no worker takes these jobs
    async with job_queue.opened(settings.database_url, 2, 4) as app:
        sql = app.connector.execute_query_async
        await _waiting_in_line(app, queue, runs)
        # Given its client's tool results, it goes on: in progress, not admitted (its slot was given back).
        await sql("UPDATE runs SET status = 'in_progress' WHERE id = %(run)s", run=resumed.id)

        async def slot_taken(run: Run) -> bool:
            [row] = await app.connector.execute_query_all_async(
                "SELECT admitted_at IS NOT NULL AS taken FROM runs WHERE id = %(run)s", run=str(run.id)
            )
            return bool(row["taken"])

        try:
            assert (await admission.admit(org_id, holding.id)).admitted  # the organization's one slot
            assert not (await admission.admit(org_id, resumed.id)).admitted
            # Its cancel requested (stored first, as CancelRun does): its job is made due, it needs no slot.
            await sql("UPDATE runs SET cancel_requested = true WHERE id = %(run)s", run=resumed.id)
            await job_queue.QueueRunExecutor(app, 4).cancel(resumed.id)
            cancelled = (await _due(app, resumed), (await admission.admit(org_id, resumed.id)).admitted)
            cancelled_took_slot = await slot_taken(resumed)
            # Not cancelled after all (to see it wait): its job later again; the slot given back wakes it.
            await sql("UPDATE runs SET cancel_requested = false WHERE id = %(run)s", run=resumed.id)
            await sql(
                "UPDATE procrastinate_jobs SET scheduled_at = now() + interval '1 hour' WHERE lock = %(run)s",
                run=str(resumed.id),
            )
            await sql("UPDATE runs SET status = 'completed' WHERE id = %(run)s", run=holding.id)
            await admission.release(holding.id)
            woken = (await _due(app, resumed), await _due(app, newest))
            newest_admitted = (await admission.admit(org_id, newest.id)).admitted
            resumed_admitted = (await admission.admit(org_id, resumed.id)).admitted
        finally:
            await sql("DELETE FROM procrastinate_jobs WHERE queue_name = %(queue)s", queue=queue)
            await _left_behind(container, None, *runs)
    assert cancelled == (True, True) and not cancelled_took_slot
    assert woken == (True, False)  # the run in progress is woken first: it is older
    assert not newest_admitted and resumed_admitted


async def test_a_run_keeps_its_slot_while_it_executes_and_gives_it_back_with_the_write_that_stops_it(
    container: Container, settings: Settings
) -> None:
    """The organization's one slot, held by a run: kept through its writes in progress, and through a question asked
    in its open tool call (the call waits for the answer in the run's process, and goes on); given back by the write
    that stores it waiting for its client's tools (the oldest waiting run is admitted at once, nothing else written).
    That run's end gives it back too, and its job's end (the release) wakes the oldest waiting run only."""
    runs = await _three_runs_one_slot(container)
    org_id, (holding, older, newest) = runs[0].org_id, runs
    admission = RunAdmission(container.database(), default_limit=10)
    queue = f"test-{uuid.uuid4().hex[:8]}"  # no worker takes these jobs
    now = datetime.now(UTC)
    question = Elicitation.asked(
        tool_call_id="call_1", tool_name="plan", key="party", message="How many?", requested_schema={}, live=True
    )

    async def stored(run_id: RunId, change: Callable[[Run], None]) -> None:
        async with as_port(container.uow()) as uow:
            run = await uow.runs.get(org_id, run_id)
            assert run is not None
            change(run)
            await uow.runs.save(run)
            await uow.commit()

    async def refused(run: Run) -> bool:
        return not (await admission.admit(org_id, run.id)).admitted

    def waiting_for_its_client(run: Run) -> None:
        run.require_action((PendingToolCall(id="c1", name="ask", arguments={}, type="client"),), now)

    async with job_queue.opened(settings.database_url, 2, 4) as app:
        await _waiting_in_line(app, queue, runs)
        try:
            assert (await admission.admit(org_id, holding.id)).admitted
            await stored(holding.id, lambda run: run.start(now))
            kept = [await refused(older)]
            await stored(holding.id, lambda run: run.ask_live(question, now))
            await admission.release(holding.id)  # as a job of the run that lost it would as it ends: nothing
            kept.append(await refused(older))
            await stored(holding.id, lambda run: run.took_answer(question.id, now))
            kept.append(await refused(older))
            await stored(holding.id, waiting_for_its_client)
            given_back = not await refused(older)
            await stored(older.id, lambda run: run.start(now))
            await stored(older.id, lambda run: run.complete(now))
            ended_unwoken = await _due(app, newest)
            await admission.release(older.id)
            woken = await _due(app, newest)
            newest_admitted = not await refused(newest)
        finally:
            await _left_behind(container, app, *runs)
    assert kept == [True, True, True]  # in progress; its open call waiting for the answer; going on with it
    assert given_back
    assert not ended_unwoken and woken  # its job due now, woken by the ended run's release
    assert newest_admitted


class _CancelledMeanwhile(RunAdmission):
    """The admission, and a user's cancel of the run stored just after it (before the job goes back to the queue)."""

    def __init__(self, database: Database, cancel: Callable[[], Awaitable[None]]) -> None:
        super().__init__(database, default_limit=10)
        self._cancel = cancel

    async def _admit(self, org_id: OrgId, run_id: RunId) -> Admission:
        admission = await super()._admit(org_id, run_id)
        await self._cancel()
        return admission


async def _never(org_id: OrgId, run_id: RunId, *, hand_back_on_outage: bool = False) -> None:
    raise AssertionError("a run refused a slot does not execute")


async def test_a_run_refused_a_slot_as_its_cancel_is_stored_has_its_job_made_due_at_once(
    container: Container, settings: Settings
) -> None:
    """The cancel found the run's job being taken (not waiting in the queue) and aborted it; the job, refused a
    slot, went back to the queue for later: it is made due there, and the run, admitted without a slot, ends."""
    runs = await _three_runs_one_slot(container)
    org_id, (holding, resumed, _newest) = runs[0].org_id, runs
    queue = f"test-{uuid.uuid4().hex[:8]}"  # no worker takes these jobs
    async with job_queue.opened(settings.database_url, 2, 4) as app:
        sql = app.connector.execute_query_async
        await _waiting_in_line(app, queue, runs)
        await sql("UPDATE runs SET status = 'in_progress' WHERE id = %(run)s", run=resumed.id)  # goes on, waits

        async def cancel() -> None:
            await sql("UPDATE runs SET cancel_requested = true WHERE id = %(run)s", run=resumed.id)

        admission = _CancelledMeanwhile(container.database(), cancel)
        job = Job(id=1, queue=queue, lock=str(resumed.id), queueing_lock=str(resumed.id), task_name=run_queue.TASK)
        context: Any = SimpleNamespace(app=app, job=job, abort_reason=lambda: None)
        try:
            assert (await RunAdmission(container.database(), default_limit=10).admit(org_id, holding.id)).admitted
            await job_queue.WorkerRuns(_never, admission=admission).execute(context, org_id, resumed.id)
            due = await _due(app, resumed)
        finally:
            await sql("DELETE FROM procrastinate_jobs WHERE queue_name = %(queue)s", queue=queue)
            await _left_behind(container, None, *runs)
    assert due


async def _held_job(app: Any, run: Run) -> int:
    """The run's job, as a worker holds it (taken: `doing`), in a queue of its own (no worker takes its jobs)."""
    queue = f"test-{uuid.uuid4().hex[:8]}"
    task = app.configure_task(run_queue.TASK, queue=queue, lock=str(run.id), queueing_lock=str(run.id))
    job_id: int = await task.defer_async(**run_queue.run_job_args(run.org_id, run.id))
    await app.connector.execute_query_async(
        "UPDATE procrastinate_jobs SET status = 'doing' WHERE id = %(id)s", id=job_id
    )
    return job_id


async def _run_jobs(app: Any, run: Run) -> list[tuple[str, bool, bool]]:
    """The run's jobs in the order they were queued: status, whether their abort was requested, whether due now."""
    found = await app.connector.execute_query_all_async(
        "SELECT status, abort_requested, coalesce(scheduled_at <= now() + interval '1 second', true) AS due"
        " FROM procrastinate_jobs WHERE lock = %(lock)s ORDER BY id",
        lock=str(run.id),
    )
    return [(row["status"], row["abort_requested"], row["due"]) for row in found]


@pytest.mark.parametrize("stopped", ["handed_back", "not_started"])
async def test_a_run_whose_cancel_asks_its_job_to_abort_as_the_job_goes_back_to_the_queue_keeps_a_job(
    container: Container, settings: Settings, stopped: str
) -> None:
    """A worker handed the run back (it stops), or the run could not start: its job is about to go back to the
    queue when a user's cancel asks it to abort. procrastinate fails such a job instead of queueing it again; the
    run gets a job of its own, due as the retry would have been (else it would stay unfinished, its thread busy,
    with no job), and a job waiting in the queue is not cancelled by a later cancel."""
    _thread, run = await queued_run(container)
    async with job_queue.opened(settings.database_url, 2, 4) as app:
        sql, rows = app.connector.execute_query_async, app.connector.execute_query_all_async
        job_id = await _held_job(app, run)
        [taken] = await rows("SELECT * FROM procrastinate_jobs WHERE id = %(id)s", id=job_id)
        job = Job.from_row(taken)
        error = job_queue.HandedBack(str(run.id)) if stopped == "handed_back" else job_queue.NotStarted(str(run.id))
        retry = app.tasks[run_queue.TASK].get_retry_exception(exception=error, job=job)
        assert retry is not None
        try:
            await sql("UPDATE runs SET cancel_requested = true WHERE id = %(run)s", run=run.id)
            await job_queue.QueueRunExecutor(app, 4).cancel(run.id)
            decision = retry.retry_decision
            await app.job_manager.retry_job(job, retry_at=decision.retry_at, lock=decision.lock)  # as the worker does
            await job_queue.QueueRunExecutor(app, 4).cancel(run.id)  # a second cancel finds the job in the queue
            jobs = await _run_jobs(app, run)
        finally:
            await _left_behind(container, app, run)
    # The job of its own is due: a cancel makes a waiting job due at once.
    assert jobs == [("failed", True, True), ("todo", False, True)]


async def test_a_runs_job_whose_retry_meets_an_outage_goes_back_to_the_queue_once_the_database_answers(
    container: Container, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run could not start for an outage (NotStarted), and the database is down still as its job is to go back
    to the queue: the retry is tried again in the background until the database answers, however long it is down
    (else the job would stay held by a live worker, its run queued, its thread busy, for good): here a minute passes
    on the worker's clock at each try, and the database answers after ten."""
    _thread, run = await queued_run(container)
    async with job_queue.opened(settings.database_url, 2, 4) as app:
        job_id = await _held_job(app, run)
        [taken] = await app.connector.execute_query_all_async(
            "SELECT * FROM procrastinate_jobs WHERE id = %(id)s", id=job_id
        )
        pool, down = cast(procrastinate.PsycopgConnector, app.connector).pool, [10]
        connection = pool.connection
        minutes = itertools.count()

        def unless_down(*args: Any, **kwargs: Any) -> Any:
            if down[0]:
                down[0] -= 1
                raise psycopg_pool.PoolTimeout("couldn't get a connection after 30.00 sec")
            return connection(*args, **kwargs)

        try:
            with monkeypatch.context() as patched:
                patched.setattr(pool, "connection", unless_down)
                patched.setattr(job_queue, "RETRY_PAUSES", (0.01,))
                patched.setattr(job_queue, "time", SimpleNamespace(monotonic=lambda: 60.0 * next(minutes)))
                await app.job_manager.retry_job(Job.from_row(taken), retry_at=datetime.now(UTC))
                returned_while_down = down[0] > 0
                # Tried again in the background (the worker is not held up), as seen on a connection of the test's.
                async with (
                    await psycopg.AsyncConnection.connect(libpq_dsn(settings.database_url), autocommit=True) as own,
                    asyncio.timeout(10),
                ):
                    while True:
                        found = await own.execute("SELECT status FROM procrastinate_jobs WHERE id = %s", (job_id,))
                        if (await found.fetchone()) == ("todo",):
                            break
                        await asyncio.sleep(0.05)
            jobs = await _run_jobs(app, run)
            # A try whose reply was lost is made again: the job, taken by another worker since, is left to it.
            await app.connector.execute_query_async(
                "UPDATE procrastinate_jobs SET status = 'doing' WHERE id = %(id)s", id=job_id
            )
            await app.job_manager.retry_job(Job.from_row(taken), retry_at=datetime.now(UTC))
            again = await _run_jobs(app, run)
        finally:
            await _left_behind(container, app, run)
    assert returned_while_down  # the worker is not held up: a worker that stops need not wait for the database
    assert down == [0]  # the database was down for ten tries
    assert jobs == [("todo", False, True)]
    assert again == [("doing", False, True)]


_WAITING_FOR_A_LOCK = (
    "SELECT count(*) AS waiting FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
    " WHERE NOT l.granted AND a.datname = current_database()"
)


async def test_a_cancel_that_meets_the_runs_job_going_back_to_the_queue_makes_it_due_and_leaves_it_there(
    container: Container, settings: Settings
) -> None:
    """The run's job held by a worker goes back to the queue for later (the run handed back, or not started) just as
    a user's cancel asks it to abort: the cancel waits for that and finds the job back in the queue. It makes it due
    (its run then records its end), and does not cancel it: the run would be left with no job, its thread busy."""
    _thread, run = await queued_run(container)
    async with job_queue.opened(settings.database_url, 2, 4) as app:
        sql, rows = app.connector.execute_query_async, app.connector.execute_query_all_async
        job_id = await _held_job(app, run)
        await sql("UPDATE runs SET cancel_requested = true WHERE id = %(run)s", run=run.id)  # the cancel, stored
        try:
            async with await psycopg.AsyncConnection.connect(libpq_dsn(settings.database_url)) as worker:
                # The worker's retry of the job, as procrastinate makes it, not committed yet.
                await worker.execute(
                    "SELECT procrastinate_retry_job_v2(%s, now() + interval '1 hour', NULL, NULL, NULL)", (job_id,)
                )
                cancelling = asyncio.create_task(job_queue.QueueRunExecutor(app, 4).cancel(run.id))
                async with asyncio.timeout(10):  # the cancel waits for the job's row
                    while True:
                        if (await rows(_WAITING_FOR_A_LOCK))[0]["waiting"]:
                            break
                        await asyncio.sleep(0.05)
                await worker.commit()
            await cancelling
            jobs = await _run_jobs(app, run)
        finally:
            await _left_behind(container, app, run)
    assert jobs == [("todo", False, True)]


@pytest.mark.parametrize("left", ["in_progress", "asking_its_user"])
async def test_a_run_cut_by_its_cancel_before_it_could_record_it_gets_a_job_that_ends_it(
    container: Container, settings: Settings, left: str
) -> None:
    """A user's cancel aborts the run's job as the run is being taken, before it can record its end: a job of its
    own, due at once, ends it (else it would stay in progress, or asking its user in a call that is gone, its thread
    busy, with no job)."""
    _thread, run = await queued_run(container)
    if left == "asking_its_user":
        async with as_port(container.uow()) as uow:
            asking = await uow.runs.get(run.org_id, run.id)
            assert asking is not None
            asking.start(datetime.now(UTC))
            question = Elicitation.asked(
                tool_call_id="c1", tool_name="plan", key="party", message="How many?", requested_schema={}, live=True
            )
            asking.ask_live(question, datetime.now(UTC))
            await uow.runs.save(asking)
            await uow.commit()
    taken = asyncio.Event()

    async def cut(org_id: OrgId, run_id: RunId, *, hand_back_on_outage: bool = False) -> None:
        taken.set()
        await asyncio.Event().wait()  # cancelled here, with nothing recorded

    async with job_queue.opened(settings.database_url, 2, 4) as app:
        sql = app.connector.execute_query_async
        status = "in_progress" if left == "in_progress" else "requires_action"
        await sql(
            "UPDATE runs SET status = %(status)s, cancel_requested = true WHERE id = %(run)s",
            status=status,
            run=str(run.id),
        )
        job = Job(id=1, queue=run_queue.QUEUE, lock=str(run.id), queueing_lock=str(run.id), task_name=run_queue.TASK)
        context: Any = SimpleNamespace(app=app, job=job, abort_reason=lambda: None)
        executing = asyncio.create_task(job_queue.WorkerRuns(cut).execute(context, run.org_id, run.id))
        try:
            async with asyncio.timeout(10):
                await taken.wait()
            executing.cancel()  # the job aborted by the user's cancel
            with pytest.raises(asyncio.CancelledError):
                await executing
            # A todo job due now; or the suite's worker (in worker mode) took it already, and the run ended.
            rows = await app.connector.execute_query_all_async(
                "SELECT scheduled_at <= now() AS due FROM procrastinate_jobs"
                " WHERE queueing_lock = %(run)s AND status = 'todo'",
                run=str(run.id),
            )
            async with as_port(container.uow()).read_only() as uow:
                stored = await uow.runs.get(run.org_id, run.id)
        finally:
            await _left_behind(container, app, run)
    assert [row["due"] for row in rows] == [True] or (stored is not None and stored.status is RunStatus.CANCELLED)


async def test_an_admission_holding_its_organizations_lock_holds_up_other_admissions_but_not_the_organizations_writes(
    container: Container, settings: Settings
) -> None:
    """Admissions of one organization wait for each other (its row's lock); the organization's writes, which check
    a foreign key to that row (a new thread here; a run, its messages and events alike), do not wait for them."""
    thread, run = await queued_run(container)
    dsn = libpq_dsn(settings.database_url)
    admit = "SELECT admitted FROM threadline_admit_run(%s, %s, 10)"
    async with (
        await psycopg.AsyncConnection.connect(dsn) as admitting,
        await psycopg.AsyncConnection.connect(dsn) as another_admission,
    ):
        await admitting.execute(admit, (thread.org_id, run.id))  # its transaction stays open: the lock is held
        async with asyncio.timeout(10):  # (held up, it would wait for the admission's commit, which comes after)
            async with as_port(container.uow()) as uow:
                written = builders.thread(thread.org_id, agent_id=thread.agent_id)
                await uow.threads.add(written)
                await uow.commit()
        await another_admission.execute("SET lock_timeout = '200ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            await another_admission.execute(admit, (thread.org_id, run.id))
        await admitting.commit()
    async with as_port(container.uow().read_only()) as uow:
        assert await uow.threads.get(thread.org_id, written.id) is not None


async def test_a_job_queue_that_fails_while_the_database_answers_is_reported_unreachable(tmp_path: Path) -> None:
    """/readyz answers 503 when the queue's health is None: here its tables are missing (a database the worker
    schema was never applied to), and procrastinate's wrapped error must not escape as a 500."""
    async with off_the_loop(fresh_database(tmp_path)) as url, job_queue.opened(url, 1, 4) as app:
        executor = job_queue.QueueRunExecutor(app, lost_seconds=4)
        assert await executor.health() is None
