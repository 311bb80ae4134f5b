"""Asking an agent in a thread of its own (AskAgent), and sub-agents answering a run's delegated tasks."""

import asyncio

import pytest

from application.errors import ModelUnavailable, StorageUnavailable
from application.ports.llm import ModelRequest
from application.runs.ask_agent import NEEDS_CLIENT, Question
from application.runs.create_run import CreateRun, CreateRunCommand
from domain.agents import Agent
from domain.messages import Message, MessageRole, ToolResultContent
from domain.native_tools import ToolRef
from domain.organizations import Organization
from domain.runs import Run, RunStatus
from domain.tools import ToolType
from tests.unit.fakes.app import FakeApp, member
from tests.unit.fakes.ports import answer, call, calls


@pytest.fixture
def app() -> FakeApp:
    return FakeApp()


async def runs_of(app: FakeApp) -> list[Run]:
    return sorted(app.store.runs.values(), key=lambda r: r.id)


async def thread_of(app: FakeApp, run: Run) -> list[Message]:
    async with app.uow.read_only() as uow:
        return list(await uow.messages.list(run.org_id, run.thread_id, limit=100, after_position=None))


# -- AskAgent -----------------------------------------------------------------------------------------


async def test_an_agent_answers_in_a_thread_of_its_own_and_reports_progress(app: FakeApp) -> None:
    org = await app.organization()
    agent = await app.agent(org)
    app.model.then(answer("Lima"))
    progress: list[tuple[float, str]] = []

    async def report(value: float, message: str) -> None:
        progress.append((value, message))

    answered = await app.ask_agent().execute(
        Question(agent=agent, input="Capital of Peru?", title="MCP call of helper", progress=report)
    )
    assert (answered.text, answered.failed) == ("Lima", False)
    assert status(answered.run) is RunStatus.COMPLETED
    assert progress == [(0.0, "Starting agent"), (1.0, "Completed")]
    [thread] = app.store.threads.values()
    assert (thread.title, thread.agent_id) == ("MCP call of helper", agent.id)
    assert [(m.role, m.text) for m in await thread_of(app, answered.run)] == [
        (MessageRole.USER, "Capital of Peru?"),
        (MessageRole.ASSISTANT, "Lima"),
    ]


async def test_a_run_whose_caller_goes_away_before_it_starts_is_cancelled(app: FakeApp) -> None:
    """The caller's task is cancelled (an MCP client cancelled its call) while it is told "Starting agent": the
    run, queued with no job, is cancelled instead of staying queued with no one to execute it."""
    agent = await app.agent(await app.organization())
    telling = asyncio.Event()

    async def report(value: float, message: str) -> None:
        telling.set()
        await asyncio.Event().wait()  # the caller's connection hangs; then the call is cancelled

    asking = asyncio.create_task(app.ask_agent().execute(Question(agent=agent, input="x", title="t", progress=report)))
    await telling.wait()
    asking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asking
    [run] = await runs_of(app)
    assert status(run) is RunStatus.CANCELLED
    assert app.bus.types(run.id) == ["run.created", "run.cancelled"]


async def test_a_run_that_cannot_start_for_an_outage_is_cancelled_and_its_caller_told(app: FakeApp) -> None:
    """The run's start cannot be stored (the database did not answer for that commit): the caller gets the error,
    and the run, with no job to try it again, is cancelled by the next commit, not left queued."""
    agent = await app.agent(await app.organization())

    async def report(value: float, message: str) -> None:
        app.store.failing_commits = 1  # queued, told "Starting agent": the start's commit fails

    with pytest.raises(StorageUnavailable):
        await app.ask_agent().execute(Question(agent=agent, input="x", title="t", progress=report))
    [run] = await runs_of(app)
    assert status(run) is RunStatus.CANCELLED
    assert app.bus.types(run.id)[-1] == "run.cancelled"


async def test_a_failed_run_answers_with_why(app: FakeApp) -> None:
    agent = await app.agent(await app.organization())
    app.model.then(ModelUnavailable("the provider is down"))
    progress: list[str] = []

    async def report(value: float, message: str) -> None:
        progress.append(message)

    answered = await app.ask_agent().execute(Question(agent=agent, input="x", title="t", progress=report))
    assert answered.failed and answered.text == "the provider is down" and progress[-1] == "Failed"


async def test_a_run_that_needs_client_tools_is_cancelled_since_no_client_runs_them(app: FakeApp) -> None:
    agent = await app.agent(await app.organization(), tools=(ToolRef(type=ToolType.SEND_EMAIL),))
    app.model.then(calls(call("send_email", {"to": ["a@b.c"], "subject": "s", "body": "b"})))
    answered = await app.ask_agent().execute(Question(agent=agent, input="mail them", title="t"))
    assert answered.failed and answered.text == NEEDS_CLIENT
    [run] = await runs_of(app)
    assert status(run) is RunStatus.CANCELLED and app.bus.types(run.id)[-1] == "run.cancelled"


# -- sub-agents -------------------------------------------------------------------------------------------


async def lead_and_helpers(app: FakeApp, *chain: str) -> tuple[Organization, list[Agent]]:
    """Agents named by `chain`, each delegating to the next one."""
    org = await app.organization()
    agents: list[Agent] = []
    for name in reversed(chain):
        sub = tuple(a.id for a in agents[-1:])
        agents.append(await app.agent(org, name=name.capitalize(), slug=name, sub_agent_ids=sub))
    return org, list(reversed(agents))


async def start(app: FakeApp, org: Organization, agent: Agent, text: str) -> Run:
    thread = await app.thread(agent)
    command = CreateRunCommand(caller=member(org), thread_id=thread.id, input=text)
    return (await CreateRun(app.uow, app.clock, app.ids, app.bus, app.executor).execute(command)).run


def status(run: Run) -> RunStatus:
    return run.status


def results(messages: list[Message]) -> list[ToolResultContent]:
    return [p for m in messages for p in m.content if isinstance(p, ToolResultContent)]


async def test_a_sub_agent_answers_the_task_in_a_run_of_its_own(app: FakeApp) -> None:
    org, (lead, researcher) = await lead_and_helpers(app, "lead", "researcher")
    app.model.then(calls(call("agent__researcher", {"input": "Find the capital of Peru"})), answer("Lima"))
    app.model.then(answer("The capital is Lima."))
    run = await start(app, org, lead, "Capital of Peru?")
    done = await app.execute_run().execute(org.id, run.id)
    assert status(done) is RunStatus.COMPLETED
    parent, child = await runs_of(app)
    assert (child.agent_id, child.parent_run_id, status(child)) == (researcher.id, parent.id, RunStatus.COMPLETED)
    assert [m.text for m in await thread_of(app, child)] == ["Find the capital of Peru", "Lima"]
    [result] = results(await thread_of(app, parent))
    assert (result.tool_name, result.result, result.is_error) == ("agent__researcher", "Lima", False)
    [span] = [s for s in app.tracer.of(parent.id).spans if s.name == "sub_agent"]
    assert span.ended is not None and span.ended["metadata"] == {"childRunId": str(child.id)}
    assert app.tracer.of(child.id).metadata["parent_run_id"] == str(parent.id)


async def test_delegation_goes_only_so_deep() -> None:
    app = FakeApp(max_delegation_depth=1)
    org, (lead, _, _) = await lead_and_helpers(app, "lead", "middle", "bottom")
    app.model.then(calls(call("agent__middle", {"input": "ask bottom"})))
    app.model.then(calls(call("agent__bottom", {"input": "anything"})), answer("I could not ask."))
    app.model.then(answer("done"))
    run = await start(app, org, lead, "go")
    await app.execute_run().execute(org.id, run.id)
    _parent, child = await runs_of(app)  # the bottom agent never ran
    [refused] = results(await thread_of(app, child))
    assert (refused.result, refused.is_error) == ("Delegation failed: agents may delegate only so deep", True)
    assert len(app.model.requests) == 4


async def test_a_sub_agent_that_fails_or_needs_the_client_is_a_failed_delegation(app: FakeApp) -> None:
    org = await app.organization()
    mailer = await app.agent(org, name="Mailer", slug="mailer", tools=(ToolRef(type=ToolType.SEND_EMAIL),))
    broken = await app.agent(org, name="Broken", slug="broken")
    lead = await app.agent(
        org, name="Lead", slug="lead", sub_agent_ids=(mailer.id, broken.id), parallel_tool_calls=False
    )
    app.model.then(
        calls(
            call("agent__mailer", {"input": "mail them"}, id="1"),
            call("agent__broken", {"input": "x"}, id="2"),
            call("agent__mailer", {}, id="3"),
        ),
        calls(call("send_email", {"to": ["a@b.c"], "subject": "s", "body": "b"})),  # the mailer's run
        ModelUnavailable("down"),  # the broken agent's run
        answer("Neither worked."),
    )
    run = await start(app, org, lead, "go")
    assert status(await app.execute_run().execute(org.id, run.id)) is RunStatus.COMPLETED
    assert [(r.result, r.is_error) for r in results(await thread_of(app, run))] == [
        (f"Delegation failed: {NEEDS_CLIENT}", True),
        ("Delegation failed: down", True),
        ("Delegation failed: input parameter is required", True),
    ]


async def test_a_sub_agent_deleted_during_the_run_is_a_failed_delegation(app: FakeApp) -> None:
    org, (lead, helper) = await lead_and_helpers(app, "lead", "helper")
    app.model.then(calls(call("agent__helper", {"input": "x"})), answer("ok"))
    run = await start(app, org, lead, "go")

    async def delete_helper(request: ModelRequest) -> None:
        app.model.before = None
        async with app.uow as uow:
            await uow.agents.delete(org.id, helper.id)
            await uow.commit()

    app.model.before = delete_helper  # after the run's tools were assembled
    await app.execute_run().execute(org.id, run.id)
    [result] = results(await thread_of(app, run))
    assert (result.result, result.is_error) == ("Delegation failed: the agent no longer exists", True)
