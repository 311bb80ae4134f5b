"""Two requests with the same idempotency key at once, on fakes: the one that loses the race answers with
the winner's run and queues nothing."""

import copy
from types import TracebackType
from typing import Self

from application.runs.create_run import CreateRun, CreateRunCommand
from tests.unit.fakes.app import FakeApp, member
from tests.unit.fakes.persistence import FakeUnitOfWork, Store


class _StaleFirstRead:
    """A request's unit of work whose first read happened just before another request stored its run."""

    def __init__(self, store: Store, before: Store) -> None:
        self._store = store
        self._before: Store | None = before
        self._transaction = FakeUnitOfWork(store)
        self._expose()

    def _expose(self) -> None:
        t = self._transaction
        self.organizations, self.api_keys, self.agents, self.threads = t.organizations, t.api_keys, t.agents, t.threads
        self.messages, self.integrations, self.sources, self.runs = t.messages, t.integrations, t.sources, t.runs
        self.run_events, self.run_jobs, self.prompt_templates, self.argument_values = (
            t.run_events,
            t.run_jobs,
            t.prompt_templates,
            t.argument_values,
        )
        self.audit_events, self.usage = t.audit_events, t.usage
        self.passages, self.passage_vectors, self.thread_summaries = t.passages, t.passage_vectors, t.thread_summaries

    def read_only(self) -> FakeUnitOfWork:
        before, self._before = self._before, None
        return FakeUnitOfWork(before if before is not None else self._store, read_only=True)

    async def __aenter__(self) -> Self:
        self._transaction = FakeUnitOfWork(self._store)
        self._expose()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    async def commit(self) -> None:
        await self._transaction.commit()


async def test_the_request_that_loses_the_race_for_a_key_answers_with_the_winners_run() -> None:
    app = FakeApp()
    org = await app.organization()
    agent = await app.agent(org)
    first_thread, second_thread = await app.thread(agent), await app.thread(agent)
    before = copy.deepcopy(app.store)
    winner = await CreateRun(app.uow, app.clock, app.ids, app.bus, app.executor).execute(
        CreateRunCommand(caller=member(org), thread_id=first_thread.id, input="Hi", idempotency_key="k1")
    )
    published = len(app.bus.published)

    loser = CreateRun(_StaleFirstRead(app.store, before), app.clock, app.ids, app.bus, app.executor)
    answered = await loser.execute(
        CreateRunCommand(caller=member(org), thread_id=first_thread.id, input="Hi", idempotency_key="k1")
    )

    assert not answered.created and answered.run.id == winner.run.id
    assert list(app.store.runs) == [winner.run.id]
    assert app.store.threads[first_thread.id].message_count == 1
    assert app.store.threads[second_thread.id].message_count == 0
    assert app.executor.submitted == [(org.id, winner.run.id)] and len(app.bus.published) == published
