"""The migrations on the database under test: every revision upgrades, downgrades and upgrades again
(each step leaves the schema its revision describes), and head is the schema `tables.py` describes."""

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import create_async_engine

from domain.elicitation import Elicitation
from domain.runs import PendingToolCall, Run
from infrastructure.persistence import migrations
from infrastructure.persistence.engine import Database
from infrastructure.persistence.tables import metadata
from infrastructure.persistence.unit_of_work import SqlAlchemyUnitOfWork
from tests import builders
from tests.builders import NOW
from tests.conftest import as_port
from tests.databases import backend, fresh_database

T = TypeVar("T")
Schema = dict[str, dict[str, Any]]
"""Per table: its columns, primary key, foreign keys, indexes and unique constraints; on PostgreSQL, "(functions)":
our functions' definitions."""


def _revisions() -> list[tuple[str, str | None]]:
    """(revision, the revision it comes after), oldest first."""
    script = ScriptDirectory(str(migrations.SCRIPT_LOCATION))
    walked = reversed(list(script.walk_revisions()))
    return [(r.revision, r.down_revision if isinstance(r.down_revision, str) else None) for r in walked]


def _on(url: str, work: Callable[[Connection], T]) -> T:
    """`work` on a connection to the database (blocking: not for a running loop)."""

    async def run() -> T:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as connection:
                return await connection.run_sync(work)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def _schema(connection: Connection) -> Schema:
    found = inspect(connection)
    return {
        table: {
            "columns": sorted((c["name"], str(c["type"]), c["nullable"]) for c in found.get_columns(table)),
            "primary key": sorted(found.get_pk_constraint(table)["constrained_columns"]),
            "foreign keys": sorted(
                (tuple(f["constrained_columns"]), f["referred_table"], tuple(f["referred_columns"]))
                for f in found.get_foreign_keys(table)
            ),
            "indexes": sorted(
                (i["name"] or "", tuple(i["column_names"]), bool(i["unique"]), _predicate(i))
                for i in found.get_indexes(table)
            ),
            "unique": sorted(tuple(u["column_names"]) for u in found.get_unique_constraints(table)),
        }
        for table in found.get_table_names()
        if table != "alembic_version"
    } | _functions(connection)


def _predicate(index: Any) -> str:
    """A partial index's condition, as the database keeps it ("" for a whole-table index)."""
    options = index.get("dialect_options", {})
    where = options.get("postgresql_where", options.get("sqlite_where"))
    return "" if where is None else str(where)


_FUNCTIONS = text(
    "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
    " WHERE n.nspname = current_schema() AND p.proname LIKE 'threadline%'"
)


def _functions(connection: Connection) -> Schema:
    """Our functions' definitions, on PostgreSQL (SQLite has none): a revision may change them alone."""
    if connection.dialect.name != "postgresql":
        return {}
    definitions = sorted(tuple(row) for row in connection.execute(_FUNCTIONS))
    return {"(functions)": {"definitions": definitions}} if definitions else {}


def _current(connection: Connection) -> set[str]:
    return set(MigrationContext.configure(connection).get_current_heads())


def _differences(connection: Connection) -> list[Any]:
    """What autogenerate would write to bring the database to `tables.py` (the options env.py uses)."""
    context = MigrationContext.configure(
        connection, opts={"compare_type": True, "include_name": migrations.described_by_tables}
    )
    return list(compare_metadata(context, metadata))


@dataclass
class Step:
    revision: str
    previous: str | None
    at_after_upgrade: set[str]
    schema_after_upgrade: Schema
    at_after_downgrade: set[str]
    schema_after_downgrade: Schema
    at_after_upgrade_again: set[str]
    schema_after_upgrade_again: Schema


@pytest.fixture(scope="module")
def stairway(tmp_path_factory: pytest.TempPathFactory) -> list[Step]:
    """Each revision in turn: upgrade to it, downgrade one, upgrade again, noting where the database
    is and its schema after each (blocking work, done outside the event loop)."""
    steps = []
    with fresh_database(Path(tmp_path_factory.mktemp("stairway"))) as url:
        for revision, previous in _revisions():
            migrations.upgrade(url, revision)
            up = _on(url, _current), _on(url, _schema)
            migrations.downgrade(url, "-1")
            down = _on(url, _current), _on(url, _schema)
            migrations.upgrade(url, revision)
            again = _on(url, _current), _on(url, _schema)
            steps.append(Step(revision, previous, *up, *down, *again))
    return steps


def test_there_is_one_line_of_revisions_from_base_to_head(stairway: list[Step]) -> None:
    assert stairway[0].previous is None
    assert [s.previous for s in stairway[1:]] == [s.revision for s in stairway[:-1]]
    assert {stairway[-1].revision} == migrations.head_revisions()


def test_each_upgrade_brings_the_database_to_its_revision(stairway: list[Step]) -> None:
    for step in stairway:
        assert step.at_after_upgrade == {step.revision}, step.revision
        assert step.at_after_upgrade_again == {step.revision}, step.revision


def test_each_downgrade_brings_the_database_back_to_the_revision_before(stairway: list[Step]) -> None:
    for step in stairway:
        assert step.at_after_downgrade == ({step.previous} if step.previous else set()), step.revision


def test_each_downgrade_restores_the_schema_of_the_revision_before(stairway: list[Step]) -> None:
    before: Schema = {}
    for step in stairway:
        assert step.schema_after_downgrade == before, step.revision
        before = step.schema_after_upgrade


def test_upgrading_again_after_a_downgrade_gives_the_same_schema(stairway: list[Step]) -> None:
    for step in stairway:
        assert step.schema_after_upgrade_again == step.schema_after_upgrade, step.revision


def test_the_schema_at_head_has_the_core_tables(stairway: list[Step]) -> None:
    assert {"organizations", "api_keys", "agents", "threads", "messages"} <= set(stairway[-1].schema_after_upgrade)


# -- the ORM tables and the migrations agree ---------------------------------------------------


@pytest.fixture(scope="module")
def differences_at(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], list[Any]]]:
    """Brings one scratch database to a revision and answers what autogenerate finds against `tables.py`."""
    with fresh_database(Path(tmp_path_factory.mktemp("compare"))) as url:

        def compare(revision: str) -> list[Any]:
            migrations.upgrade(url, "head")
            if revision != "head":
                migrations.downgrade(url, revision)
            return _on(url, _differences)

        yield compare


def test_the_schema_at_head_is_the_one_the_tables_describe(differences_at: Callable[[str], list[Any]]) -> None:
    assert differences_at("head") == []


def test_the_partial_indexes_at_head_are_the_ones_the_tables_describe(tmp_path: Path) -> None:
    """Autogenerate's comparison above does not look at an index's condition: a database migrated to head and one
    made from `tables.py` have the same conditions, as the database itself writes them."""

    def made(connection: Connection) -> None:
        metadata.create_all(connection)
        connection.commit()

    def partial(connection: Connection) -> dict[str, str]:
        found = inspect(connection)
        ours = (table for table in found.get_table_names() if table in metadata.tables)  # not procrastinate's
        indexes = (i for table in ours for i in found.get_indexes(table))
        return {str(i["name"]): _predicate(i) for i in indexes if _predicate(i)}

    (tmp_path / "migrated").mkdir()
    (tmp_path / "made").mkdir()
    with fresh_database(tmp_path / "migrated") as migrated, fresh_database(tmp_path / "made") as made_url:
        migrations.upgrade(migrated)
        _on(made_url, made)
        assert _on(migrated, partial) == _on(made_url, partial) != {}


def test_the_comparison_sees_a_schema_that_is_behind(differences_at: Callable[[str], list[Any]]) -> None:
    """The comparison above can fail: at the revision before the last one that changed a table (the run's
    holder), the tables describe more. (Revisions that change no table, such as triggers, come after it.)"""
    assert differences_at("0008") != []


def test_downgrading_to_base_leaves_no_table(tmp_path: Path) -> None:
    with fresh_database(tmp_path) as url:
        migrations.upgrade(url)
        migrations.downgrade(url, "base")
        assert set(_on(url, _schema)) == set()


def _saved(url: str, *runs: Run, org: Any = None, agent: Any = None, thread: Any = None) -> None:
    """The runs written, after the organization, agent and thread given (new ones), or saved again (no thread)."""

    async def work() -> None:
        database = Database(url)
        try:
            async with as_port(SqlAlchemyUnitOfWork(database)) as uow:
                if org is not None:
                    await uow.organizations.add(org)
                if agent is not None:
                    await uow.agents.add(agent)
                if thread is not None:
                    await uow.threads.add(thread)
                for run in runs:
                    await (uow.runs.add(run) if thread is not None else uow.runs.save(run))
                await uow.commit()
        finally:
            await database.dispose()

    asyncio.run(work())


def test_a_database_with_two_unfinished_runs_in_a_thread_is_not_upgraded_past_them(tmp_path: Path) -> None:
    """Revision 0020 has the database keep one unfinished run per thread. A database that already holds two (only
    a defect wrote them) is left as it was, and the error names the runs to end; once one has ended, it
    upgrades."""
    with fresh_database(tmp_path) as url:
        migrations.upgrade(url, "0019")
        org = builders.organization()
        agent = builders.agent(org.id)
        thread = builders.thread(org.id, agent_id=agent.id)
        first, second = builders.run(org.id, thread.id, agent.id), builders.run(org.id, thread.id, agent.id)
        _saved(url, first, second, org=org, agent=agent, thread=thread)

        with pytest.raises(RuntimeError, match="more than one unfinished run") as refused:
            migrations.upgrade(url)
        assert str(first.id) in str(refused.value) and str(second.id) in str(refused.value)
        assert _on(url, _current) == {"0019"}

        first.cancel(NOW)
        _saved(url, first)
        migrations.upgrade(url)
        assert _on(url, _current) == migrations.head_revisions()


@pytest.mark.skipif(backend() != "postgresql", reason="worker mode's slots (its admission) are PostgreSQL's only")
def test_a_run_left_holding_a_slot_as_it_waits_for_its_client_gives_it_back_and_one_asking_its_user_keeps_it(
    tmp_path: Path,
) -> None:
    """Revision 0026 counts every admitted run that has not ended as holding a slot: a run an earlier version left
    holding one while it waits for its client's tool results (its release failed) would count from then on, and
    gives it back; a run whose open call asks its user still executes, and keeps it."""
    with fresh_database(tmp_path) as url:
        migrations.upgrade(url, "0025")
        org = builders.organization()
        agent = builders.agent(org.id)
        threads = [builders.thread(org.id, agent_id=agent.id) for _ in range(2)]
        waiting, asking = (builders.run(org.id, thread.id, agent.id) for thread in threads)
        for run in (waiting, asking):
            run.start(NOW)
        waiting.require_action((PendingToolCall(id="c1", name="ask", arguments={}, type="client"),), NOW)
        question = Elicitation.asked(
            tool_call_id="c2", tool_name="plan", key="party", message="How many?", requested_schema={}, live=True
        )
        asking.ask_live(question, NOW)
        _saved(url, waiting, org=org, agent=agent, thread=threads[0])
        _saved(url, asking, thread=threads[1])
        _on(url, _admitted)  # as an earlier version's admission left them
        migrations.upgrade(url)
        held = _on(url, _slots_held)
    assert held == {waiting.id: False, asking.id: True}


def _admitted(connection: Connection) -> None:
    connection.execute(text("UPDATE runs SET admitted_at = now()"))
    connection.commit()


def _slots_held(connection: Connection) -> dict[Any, bool]:
    rows = connection.execute(text("SELECT id, admitted_at IS NOT NULL AS held FROM runs")).all()
    return {row.id: row.held for row in rows}
