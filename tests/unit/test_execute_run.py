"""The run loop on fakes of every port: each step's outcome, what is stored and announced, and how runs end."""

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from application.errors import ModelUnavailable, RunNotFound
from application.ports.execution import HANDED_BACK, INTERRUPTED
from application.ports.llm import ModelRequest, ModelToolCall
from application.ports.mcp import (
    NO_HOOKS,
    McpCallHooks,
    McpContentPart,
    McpInputRequired,
    McpTarget,
    McpToolInfo,
    McpToolResult,
)
from application.ports.native_tools import CommandSpec
from application.ports.persistence import ClaimedToExecute
from application.ports.tracing import Level
from application.runs.create_run import CreateRun, CreateRunCommand
from application.runs.events import UNSTORED_SEQS
from application.runs.submit_tool_results import SubmitToolResults, SubmitToolResultsCommand, ToolResultInput
from application.runs.tools.calls import ToolLimits
from application.runs.tools.handler import ToolContext, ToolOutcome
from domain.agents import Agent
from domain.elicitation import Elicitation
from domain.ids import MessageId, OrgId, RunId
from domain.messages import Message, MessageRole, TextContent, ToolResultContent, ToolUseContent
from domain.native_tools import ToolRef
from domain.run_events import RunCompleted, RunFailed, ToolCallCompleted, ToolCallStarted
from domain.runs import ClientTool, Run, RunStatus, RunStep, StepToolCall
from domain.threads import Thread
from domain.tools import Tool, ToolType
from domain.usage import Usage
from tests.unit.fakes.app import FakeApp, admin
from tests.unit.fakes.persistence import FakeRuns
from tests.unit.fakes.ports import NOW, Commands, FakeGateway, Hold, answer, call, calls

COMMANDS = Commands(CommandSpec(name="deploy", description="Deploy"), CommandSpec(name="check", description="Check"))


def commands_agent(**fields: Any) -> dict[str, Any]:
    refs = (
        ToolRef(type=ToolType.COMMAND, config={"name": "deploy"}),
        ToolRef(type=ToolType.COMMAND, config={"name": "check"}),
    )
    return {"tools": refs} | fields


@pytest.fixture
def app() -> FakeApp:
    return FakeApp(commands=Commands(*COMMANDS.specs))


async def start(
    app: FakeApp, agent: Agent, thread: Thread, text: str = "Hello", client_tools: tuple[ClientTool, ...] = ()
) -> Run:
    command = CreateRunCommand(caller=admin(agent.org_id), thread_id=thread.id, input=text, client_tools=client_tools)
    return (await CreateRun(app.uow, app.clock, app.ids, app.bus, app.executor).execute(command)).run


async def queued(app: FakeApp, text: str = "Hello", **agent_fields: object) -> tuple[Agent, Thread, Run]:
    org = await app.organization()
    agent = await app.agent(org, **agent_fields)
    thread = await app.thread(agent)
    return agent, thread, await start(app, agent, thread, text)


async def history(app: FakeApp, thread: Thread) -> list[Message]:
    async with app.uow.read_only() as uow:
        return list(await uow.messages.list(thread.org_id, thread.id, limit=100, after_position=None))


async def stored(app: FakeApp, run: Run) -> Run:
    async with app.uow.read_only() as uow:
        found = await uow.runs.get(run.org_id, run.id)
    assert found is not None
    return found


def status(run: Run) -> RunStatus:
    return run.status


# -- the outcomes of a step -------------------------------------------------------------------------


async def test_an_answer_without_tool_calls_completes_the_run(app: FakeApp) -> None:
    app.model.then(answer("Hi there"))
    _agent, thread, run = await queued(app)
    done = await app.execute_run().execute(run.org_id, run.id)
    assert status(done) is RunStatus.COMPLETED and done.step_count == 1
    assert done.usage.total_tokens == 6 and done.steps[0].model == "scripted-1"
    assert [(m.role, m.text) for m in await history(app, thread)] == [
        (MessageRole.USER, "Hello"),
        (MessageRole.ASSISTANT, "Hi there"),
    ]
    assert app.bus.types(run.id) == [
        "run.created",
        "run.in_progress",
        "message.delta",
        "message.delta",
        "run.completed",
    ]
    completed = app.bus.published[-1].payload
    assert isinstance(completed, RunCompleted) and completed.answer == "Hi there"
    assert await stored(app, run) == done


async def test_tool_calls_continue_the_loop_and_the_model_reads_their_results(app: FakeApp) -> None:
    app.model.then(calls(call("command__deploy", {"arguments": ["prod"]})), answer("Deployed."))
    _agent, thread, run = await queued(app, **commands_agent())
    done = await app.execute_run().execute(run.org_id, run.id)
    assert status(done) is RunStatus.COMPLETED and done.step_count == 2
    assert app.commands.runs == [("deploy", ["prod"])]
    messages = await history(app, thread)
    assert [m.role for m in messages] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.ASSISTANT,
    ]
    [result] = messages[2].content
    assert result == ToolResultContent(
        tool_use_id="call_command__deploy", tool_name="command__deploy", result="done\n[exit code 0]"
    )
    assert app.model.requests[1].messages[-1] == messages[2]
    types = app.bus.types(run.id)
    assert types[types.index("tool_call.started") :] == [
        "tool_call.started",
        "tool_call.completed",
        "message.delta",
        "message.delta",
        "run.completed",
    ]
    started = next(e.payload for e in app.bus.published if isinstance(e.payload, ToolCallStarted))
    assert (started.name, started.tool_type, dict(started.arguments)) == (
        "command__deploy",
        "command",
        {"arguments": ["prod"]},
    )


async def test_a_client_tool_makes_the_run_wait_and_its_result_resumes_it(app: FakeApp) -> None:
    app.model.then(calls(call("get_location", {"precise": True})), answer("You are in Lisbon."))
    org = await app.organization()
    agent = await app.agent(org)
    thread = await app.thread(agent)
    tool = ClientTool(name="get_location", description="Where the user is", parameters={"type": "object"})
    run = await start(app, agent, thread, "Where am I?", client_tools=(tool,))

    waiting = await app.execute_run().execute(run.org_id, run.id)
    assert status(waiting) is RunStatus.REQUIRES_ACTION
    assert [(c.id, c.name, c.type) for c in waiting.required_action] == [
        ("call_get_location", "get_location", "client")
    ]
    assert waiting.steps[0].tool_calls[0].pending
    assert app.bus.types(run.id)[-1] == "run.requires_action"

    submit = SubmitToolResults(app.uow, app.clock, app.ids, app.bus, app.executor)
    resumed = await submit.execute(
        SubmitToolResultsCommand(
            caller=admin(org),
            run_id=run.id,
            results=(ToolResultInput(tool_use_id="call_get_location", result="Lisbon"),),
        )
    )
    assert status(resumed) is RunStatus.IN_PROGRESS and app.executor.submitted[-1] == (org.id, run.id)
    done = await app.execute_run().execute(run.org_id, run.id)
    assert status(done) is RunStatus.COMPLETED
    assert app.model.requests[1].messages[-1].content == (
        ToolResultContent(tool_use_id="call_get_location", tool_name="get_location", result="Lisbon"),
    )
    resumed_events = app.bus.types(run.id)
    assert "run.in_progress" in resumed_events[resumed_events.index("run.requires_action") :]


async def test_a_displayable_native_tool_waits_for_the_client_too(app: FakeApp) -> None:
    app.model.then(calls(call("send_email", {"to": ["a@b.c"], "subject": "Hi", "body": "Hello"})))
    _, _, run = await queued(app, tools=(ToolRef(type=ToolType.SEND_EMAIL),))
    waiting = await app.execute_run().execute(run.org_id, run.id)
    assert status(waiting) is RunStatus.REQUIRES_ACTION and waiting.required_action[0].type == "send_email"


async def test_a_model_error_fails_the_run_with_its_code(app: FakeApp) -> None:
    app.model.then(ModelUnavailable("the model provider could not be reached"))
    _, _, run = await queued(app)
    failed = await app.execute_run().execute(run.org_id, run.id)
    assert status(failed) is RunStatus.FAILED
    assert failed.error is not None and (failed.error.code, failed.error.message) == (
        "model_unavailable",
        "the model provider could not be reached",
    )
    event = app.bus.published[-1].payload
    assert isinstance(event, RunFailed) and event.error == failed.error
    trace = app.tracer.of(run.id)
    assert trace.generations[0].ended is not None and trace.generations[0].ended["level"] is Level.ERROR
    assert trace.ended is not None and trace.ended["level"] is Level.ERROR


async def test_a_run_that_keeps_calling_tools_fails_after_max_steps(app: FakeApp) -> None:
    app.model.then(*[calls(call("command__check", id=f"c{n}")) for n in range(2)])
    _, _, run = await queued(app, max_steps=2, **commands_agent())
    failed = await app.execute_run().execute(run.org_id, run.id)
    assert status(failed) is RunStatus.FAILED and failed.step_count == 2 and len(app.model.requests) == 2
    assert failed.error is not None and failed.error.code == "max_steps_exceeded"
    assert failed.error.message == "the agent was still calling tools after 2 steps"


# -- tool calls ---------------------------------------------------------------------------------------


class Gate:
    """A command tool that counts how many of its calls run at once. With `check_first`, `deploy` finishes only
    after `check` did (so parallel calls finish out of call order)."""

    def __init__(self, *, check_first: bool = False) -> None:
        self.check_first = check_first
        self.check_done = asyncio.Event()
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.running = 0
        self.most = 0

    async def __call__(self, model_call: ModelToolCall, tool: Tool, context: ToolContext) -> ToolOutcome:
        name = str(tool.metadata["command"])
        self.running += 1
        self.most = max(self.most, self.running)
        self.started.set()
        try:
            await asyncio.sleep(0)  # let the step's other calls start, if they may
            if name == "deploy" and self.check_first:
                await self.check_done.wait()
            if name == "check" and not self.check_first:
                await self.release.wait()
        finally:
            self.running -= 1
        if name == "check":
            self.check_done.set()
        return ToolOutcome(text=f"{name} done")


async def test_parallel_calls_run_at_once_and_their_results_keep_the_call_order() -> None:
    gate = Gate(check_first=True)
    app = FakeApp(commands=Commands(*COMMANDS.specs), extra_handlers={ToolType.COMMAND: gate})
    app.model.then(calls(call("command__deploy"), call("command__check")), answer("ok"))
    _, thread, run = await queued(app, **commands_agent())
    done = await app.execute_run().execute(run.org_id, run.id)
    assert status(done) is RunStatus.COMPLETED and gate.most == 2
    tool_message = (await history(app, thread))[2]
    assert [p.tool_name for p in tool_message.content if isinstance(p, ToolResultContent)] == [
        "command__deploy",
        "command__check",
    ]
    completed = [e.payload.name for e in app.bus.published if isinstance(e.payload, ToolCallCompleted)]
    assert completed == ["command__check", "command__deploy"]  # followers hear of each as it finishes


async def test_an_agent_without_parallel_calls_makes_them_one_at_a_time() -> None:
    gate = Gate()
    app = FakeApp(commands=Commands(*COMMANDS.specs), extra_handlers={ToolType.COMMAND: gate})
    app.model.then(calls(call("command__deploy"), call("command__check")), answer("ok"))
    _, _, run = await queued(app, **commands_agent(parallel_tool_calls=False))
    gate.release.set()
    done = await app.execute_run().execute(run.org_id, run.id)
    assert status(done) is RunStatus.COMPLETED and gate.most == 1


async def test_parallel_calls_are_bounded_by_the_limit() -> None:
    gate = Gate()
    app = FakeApp(
        commands=Commands(*COMMANDS.specs),
        extra_handlers={ToolType.COMMAND: gate},
        limits=ToolLimits(parallel_calls=1),
    )
    app.model.then(calls(call("command__deploy"), call("command__check")), answer("ok"))
    _, _, run = await queued(app, **commands_agent())
    gate.release.set()
    assert status(await app.execute_run().execute(run.org_id, run.id)) is RunStatus.COMPLETED
    assert gate.most == 1


async def test_unknown_tools_bad_arguments_and_long_results_are_told_to_the_model() -> None:
    app = FakeApp(commands=Commands(*COMMANDS.specs), limits=ToolLimits(result_max_chars=4))
    bad = ModelToolCall(id="bad", name="command__check", arguments={}, arguments_error="not a JSON object")
    app.model.then(calls(call("teleport"), bad, call("command__deploy")), answer("ok"))
    _, thread, run = await queued(app, **commands_agent())
    done = await app.execute_run().execute(run.org_id, run.id)
    results = [p for p in (await history(app, thread))[2].content if isinstance(p, ToolResultContent)]
    assert results[0].result == "Tool 'teleport' does not exist. Available tools: command__deploy, command__check"
    assert results[1].result == "Invalid arguments for tool 'command__check': not a JSON object"
    assert results[2].result == "done\n…[truncated: 14 more characters]"
    assert [r.is_error for r in results] == [True, True, False]
    assert [c.is_error for c in done.steps[0].tool_calls] == [True, True, False]
    assert [c.type for c in done.steps[0].tool_calls] == ["unknown", "command", "command"]


async def test_a_tool_the_server_cannot_run_is_told_to_the_model() -> None:
    app = FakeApp(commands=Commands(*COMMANDS.specs), without_handlers=frozenset({ToolType.COMMAND}))
    app.model.then(calls(call("command__deploy")), answer("ok"))
    _, thread, run = await queued(app, **commands_agent())
    await app.execute_run().execute(run.org_id, run.id)
    [result] = (await history(app, thread))[2].content
    assert (
        isinstance(result, ToolResultContent)
        and result.result == "Tool 'command__deploy' cannot be used on this server"
    )


async def test_warnings_of_tool_assembly_stay_on_the_run(app: FakeApp) -> None:
    app.model.then(answer("ok"))
    _, _, run = await queued(app, tools=(ToolRef(type=ToolType.INTERNET_SEARCH),))
    done = await app.execute_run().execute(run.org_id, run.id)
    assert done.warnings == ("internet_search is not configured on this server; it was skipped",)
    assert (await stored(app, run)).warnings == done.warnings


# -- cancellation, interruption, failures ------------------------------------------------------------


async def test_a_run_cancelled_before_it_starts_never_calls_the_model(app: FakeApp) -> None:
    _, _, run = await queued(app)
    async with app.uow as uow:
        await uow.runs.request_cancel(run.org_id, run.id)
        await uow.commit()
    cancelled = await app.execute_run().execute(run.org_id, run.id)
    assert status(cancelled) is RunStatus.CANCELLED and app.model.requests == []
    assert app.bus.types(run.id) == ["run.created", "run.cancelled"]


def results_stored_later(app: FakeApp) -> asyncio.Event:
    """The commit of the step's tool results waits for the event returned (they are still being stored)."""
    writes = asyncio.Event()

    async def deploy(_call: ModelToolCall, _tool: Tool, _context: ToolContext, /) -> ToolOutcome:
        app.store.commit_waits = writes
        return ToolOutcome(text="deployed")

    app.extra_handlers = {ToolType.COMMAND: deploy}
    return writes


async def test_the_model_reads_the_tool_results_while_they_are_being_stored(app: FakeApp) -> None:
    """The model's next call does not wait for the step's tool results to be stored (it has them); its answer is
    stored after them."""
    writes = results_stored_later(app)
    app.model.then(calls(call("command__deploy")), answer("Deployed"))
    _agent, thread, run = await queued(app, **commands_agent())
    stored_when_asked: list[list[MessageRole]] = []

    async def second_call(_request: ModelRequest) -> None:
        if len(app.model.requests) == 2:
            stored_when_asked.append([m.role for m in await history(app, thread)])
            writes.set()

    app.model.before = second_call
    async with asyncio.timeout(10):  # waiting for the results to be stored first would never end
        done = await app.execute_run().execute(run.org_id, run.id)

    assert status(done) is RunStatus.COMPLETED
    assert stored_when_asked == [[MessageRole.USER, MessageRole.ASSISTANT]]
    asked = app.model.requests[1].messages[-1]
    assert asked.role is MessageRole.TOOL and asked.content[0] == ToolResultContent(
        tool_use_id="call_command__deploy", tool_name="command__deploy", result="deployed"
    )
    roles = [m.role for m in await history(app, thread)]
    assert roles == [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL, MessageRole.ASSISTANT]
    assert app.bus.types(run.id)[-2:] == ["message.delta", "run.completed"]


async def test_tool_results_that_cannot_be_stored_stop_the_model_call_beside_them(app: FakeApp) -> None:
    writes = results_stored_later(app)
    thinking = Hold()  # never released: the run ends without its answer
    app.model.then(calls(call("command__deploy")), thinking)
    _agent, thread, run = await queued(app, **commands_agent())
    task = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
    async with asyncio.timeout(10):
        await thinking.received.wait()  # asked while the results are being stored
        app.store.failing_commits = 1
        writes.set()
        failed = await task

    assert status(failed) is RunStatus.FAILED and failed.error is not None
    assert failed.error.code == "storage_unavailable"
    assert await stored(app, run) == failed
    assert [m.role for m in await history(app, thread)] == [MessageRole.USER, MessageRole.ASSISTANT]


async def test_a_run_cancelled_while_its_tool_results_are_stored_ends_after_them(app: FakeApp) -> None:
    writes = results_stored_later(app)
    thinking = Hold()
    app.model.then(calls(call("command__deploy")), thinking)
    _agent, thread, run = await queued(app, **commands_agent())
    task = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
    async with asyncio.timeout(10):
        await thinking.received.wait()  # asked while the results are being stored
    task.cancel()
    writes.set()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert status(await stored(app, run)) is RunStatus.CANCELLED
    assert [m.role for m in await history(app, thread)] == [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL]
    events = [e.type.value for e in app.bus.published if e.run_id == run.id and e.type.value != "message.delta"]
    assert events[-2:] == ["tool_call.completed", "run.cancelled"]


class LookupServer(FakeGateway):
    """An MCP server with one tool, `lookup`, marked read-only or not; a call notes what the thread had stored
    when it began, and waits for `answering` when given."""

    def __init__(self, *, read_only: bool, answering: asyncio.Event | None = None, progress: bool = False) -> None:
        info = McpToolInfo(name="lookup", description="Look up", input_schema={"type": "object"}, read_only=read_only)
        found = McpToolResult(parts=(McpContentPart(type="text", text="found"),), structured=None, is_error=False)
        super().__init__(tools=[info], result=found)
        self.answering, self.began = answering, asyncio.Event()
        self.stored_when_called: list[list[MessageRole]] = []
        self.thread: Thread | None = None
        self.app: FakeApp | None = None
        self.cancelled = False
        self.progress = progress
        self.reporting: asyncio.Task[None] | None = None
        """With `progress`: the call's progress report, told from a task of its own (as the MCP client's session
        does: a cancellation raised there would end the session, which other calls share)."""

    async def call_tool(
        self, target: McpTarget, name: str, arguments: Any, hooks: McpCallHooks = NO_HOOKS
    ) -> McpToolResult | McpInputRequired:
        assert self.app is not None and self.thread is not None
        self.stored_when_called.append([m.role for m in await history(self.app, self.thread)])
        if self.progress and (report := hooks.on_progress) is not None:

            async def reporting() -> None:
                await report(0.5, 1.0, "half way")

            self.reporting = asyncio.create_task(reporting())
        self.began.set()
        try:
            if self.answering is not None:
                await self.answering.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return await super().call_tool(target, name, arguments, hooks)


async def lookup_run(server: LookupServer) -> tuple[FakeApp, Thread, Run]:
    app = FakeApp(gateway=server)
    org = await app.organization()
    integration = await app.integration(org, slug="memo")
    agent = await app.agent(org, mcp_integration_ids=(integration.id,))
    thread = await app.thread(agent)
    server.app, server.thread = app, thread
    return app, thread, await start(app, agent, thread)


def step_stored_later(app: FakeApp) -> asyncio.Event:
    """The commit of the step that asks for the tool call (the one after the first model call) waits for the
    event returned."""
    writes = asyncio.Event()

    async def first_call(_request: ModelRequest) -> None:
        if len(app.model.requests) == 1:
            app.store.commit_waits = writes

    app.model.before = first_call
    return writes


async def test_a_tool_that_only_reads_is_called_while_its_step_is_stored() -> None:
    """The call begins before the step asking for it is stored (it waits for nothing the call does); what the run
    tells of the call still comes after the step's events."""
    server = LookupServer(read_only=True)
    app, thread, run = await lookup_run(server)
    app.model.then(calls(call("memo__lookup")), answer("Found it"))
    writes = step_stored_later(app)

    async def release_when_called() -> None:
        await server.began.wait()
        writes.set()

    releasing = asyncio.create_task(release_when_called())
    async with asyncio.timeout(10):  # a call made only once the step is stored would never begin
        done = await app.execute_run().execute(run.org_id, run.id)
    await releasing

    assert status(done) is RunStatus.COMPLETED
    assert server.stored_when_called == [[MessageRole.USER]]
    roles = [m.role for m in await history(app, thread)]
    assert roles == [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL, MessageRole.ASSISTANT]
    told = [e for e in app.bus.published if e.run_id == run.id and e.type.value != "message.delta"]
    assert [e.type.value for e in told][-3:] == ["tool_call.started", "tool_call.completed", "run.completed"]
    assert [e.seq for e in told] == sorted(e.seq for e in told)


async def test_a_tool_that_may_change_things_is_called_once_its_step_is_stored() -> None:
    server = LookupServer(read_only=False)
    app, _thread, run = await lookup_run(server)
    app.model.then(calls(call("memo__lookup")), answer("Found it"))
    done = await app.execute_run().execute(run.org_id, run.id)
    assert status(done) is RunStatus.COMPLETED
    assert server.stored_when_called == [[MessageRole.USER, MessageRole.ASSISTANT]]


async def calling_beside_the_step(
    server: LookupServer,
) -> tuple[FakeApp, Thread, Run, asyncio.Event, "asyncio.Task[Run]"]:
    """A run whose read-only call has begun while its step's commit waits for the event returned."""
    app, thread, run = await lookup_run(server)
    app.model.then(calls(call("memo__lookup")), answer("never asked"))
    writes = step_stored_later(app)
    task = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
    async with asyncio.timeout(10):
        await server.began.wait()
    return app, thread, run, writes, task


async def test_a_step_that_cannot_be_stored_stops_the_read_only_call_begun_beside_it() -> None:
    """The call is cancelled, and nothing of it is told: not its result, nor the progress it reported while the
    step was being stored (from a task of the session's, into which no cancellation is raised)."""
    server = LookupServer(read_only=True, answering=asyncio.Event(), progress=True)  # it never answers by itself
    app, thread, run, writes, task = await calling_beside_the_step(server)
    async with asyncio.timeout(10):
        app.store.failing_commits = 1
        writes.set()
        failed = await task
        assert server.reporting is not None
        await server.reporting  # returns: it raises nothing into the session

    assert status(failed) is RunStatus.FAILED and failed.error is not None
    assert failed.error.code == "storage_unavailable"
    assert server.cancelled
    assert not {"tool_call.progress", "tool_call.completed"} & set(app.bus.types(run.id))
    assert [m.role for m in await history(app, thread)] == [MessageRole.USER]


async def test_cancelling_the_task_while_a_read_only_call_runs_beside_its_step_cancels_both() -> None:
    server = LookupServer(read_only=True, answering=asyncio.Event())
    app, _thread, run, writes, task = await calling_beside_the_step(server)
    async with asyncio.timeout(10):
        task.cancel()
        writes.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert server.cancelled
    assert status(await stored(app, run)) is RunStatus.CANCELLED
    assert app.bus.types(run.id)[-1] == "run.cancelled"
    assert "tool_call.completed" not in app.bus.types(run.id)


async def cancel_asked_while_the_model_thinks(app: FakeApp, run: Run, hold: Hold) -> Run:
    """The run as it ends, its cancel asked while `hold` (a model call) waits."""
    task = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
    await hold.received.wait()
    async with app.uow as uow:  # as CancelRun does for a run that executes elsewhere
        await uow.runs.request_cancel(run.org_id, run.id)
        await uow.commit()
    hold.release.set()
    return await task


async def test_a_cancel_asked_while_the_model_thinks_calls_no_read_only_tool() -> None:
    server = LookupServer(read_only=True)
    app, thread, run = await lookup_run(server)
    hold = Hold()
    app.model.then(hold, calls(call("memo__lookup")))
    async with asyncio.timeout(10):
        cancelled = await cancel_asked_while_the_model_thinks(app, run, hold)

    assert status(cancelled) is RunStatus.CANCELLED
    assert "tool_call.completed" not in app.bus.types(run.id)
    assert [m.role for m in await history(app, thread)] == [MessageRole.USER, MessageRole.ASSISTANT]


async def test_cancelling_the_task_during_the_model_call_cancels_the_run(app: FakeApp) -> None:
    hold = Hold()
    app.model.then(hold, answer("never read"))
    _, thread, run = await queued(app)
    task = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
    await hold.received.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert status(await stored(app, run)) is RunStatus.CANCELLED
    assert app.bus.types(run.id)[-1] == "run.cancelled"
    assert [m.role for m in await history(app, thread)] == [MessageRole.USER]
    assert app.tracer.of(run.id).ended == {"output": None, "level": Level.WARNING, "status_message": "cancelled"}


async def test_a_cancel_asked_while_the_model_thinks_ends_the_run_after_its_answer(app: FakeApp) -> None:
    hold = Hold()
    app.model.then(hold, calls(call("command__deploy")))
    _agent, thread, run = await queued(app, **commands_agent())
    cancelled = await cancel_asked_while_the_model_thinks(app, run, hold)
    assert status(cancelled) is RunStatus.CANCELLED and app.commands.runs == []
    assert [m.role for m in await history(app, thread)] == [MessageRole.USER, MessageRole.ASSISTANT]


async def test_cancelling_the_task_during_a_tool_call_cancels_the_run() -> None:
    gate = Gate()
    app = FakeApp(commands=Commands(*COMMANDS.specs), extra_handlers={ToolType.COMMAND: gate})
    app.model.then(calls(call("command__check")))
    _, thread, run = await queued(app, **commands_agent())
    task = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
    await gate.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert status(await stored(app, run)) is RunStatus.CANCELLED
    assert [m.role for m in await history(app, thread)] == [MessageRole.USER, MessageRole.ASSISTANT]


async def test_a_run_interrupted_by_shutdown_fails_as_interrupted(app: FakeApp) -> None:
    hold = Hold()
    app.model.then(hold)
    _, _, run = await queued(app)
    task = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
    await hold.received.wait()
    task.cancel(INTERRUPTED)
    with pytest.raises(asyncio.CancelledError):
        await task
    interrupted = await stored(app, run)
    assert status(interrupted) is RunStatus.FAILED and interrupted.error is not None
    assert interrupted.error.code == "interrupted"


async def test_a_run_handed_back_by_its_stopping_worker_stays_as_stored_and_resumes_elsewhere(app: FakeApp) -> None:
    hold = Hold()
    app.model.then(hold)
    _, thread, run = await queued(app)
    task = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
    await hold.received.wait()
    task.cancel(HANDED_BACK)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert status(await stored(app, run)) is RunStatus.IN_PROGRESS
    assert app.bus.types(run.id)[-1] == "run.in_progress"  # nothing ended it
    app.model.then(answer("Finished elsewhere"))  # another worker makes the model call again
    resumed = await app.execute_run().execute(run.org_id, run.id)
    assert status(resumed) is RunStatus.COMPLETED
    assert [m.role for m in await history(app, thread)] == [MessageRole.USER, MessageRole.ASSISTANT]


async def test_an_unexpected_error_fails_the_run_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def broken(model_call: ModelToolCall, tool: Tool, context: ToolContext) -> ToolOutcome:
        raise RuntimeError("a bug")

    app = FakeApp(commands=Commands(*COMMANDS.specs), extra_handlers={ToolType.COMMAND: broken})
    app.model.then(calls(call("command__check")))
    _, _, run = await queued(app, **commands_agent())
    failed = await app.execute_run().execute(run.org_id, run.id)
    assert status(failed) is RunStatus.FAILED and failed.error is not None
    assert (failed.error.code, failed.error.message) == ("internal_error", "the run failed unexpectedly")
    assert "run failed unexpectedly" in caplog.text
    assert app.tracer.of(run.id).ended == {
        "output": "failed",
        "level": Level.ERROR,
        "status_message": "the run failed unexpectedly",
    }


async def test_a_run_whose_agent_was_deleted_fails(app: FakeApp) -> None:
    agent, _, run = await queued(app)
    async with app.uow as uow:
        await uow.agents.delete(agent.org_id, agent.id)
        await uow.commit()
    failed = await app.execute_run().execute(run.org_id, run.id)
    assert failed.error is not None and failed.error.code == "agent_not_found"
    assert app.bus.types(run.id) == ["run.created", "run.failed"]


async def test_a_run_that_is_not_queued_is_left_as_it_is(app: FakeApp) -> None:
    app.model.then(answer("done"))
    _, _, run = await queued(app)
    done = await app.execute_run().execute(run.org_id, run.id)
    events = len(app.bus.published)
    again = await app.execute_run().execute(run.org_id, run.id)
    assert again == done and len(app.bus.published) == events and len(app.model.requests) == 1


async def test_an_unknown_run_is_not_found(app: FakeApp) -> None:
    _, _, run = await queued(app)
    with pytest.raises(RunNotFound):
        await app.execute_run().execute(run.org_id, RunId(app.ids.new()))


async def test_a_run_that_cannot_start_for_an_unexpected_error_fails_and_its_thread_takes_the_next(
    app: FakeApp, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Its start stopped by an error nothing expected (here its agent cannot be read): the run fails as
    internal_error, said with its event, instead of staying queued, its thread busy, while its process lives."""
    agent, thread, run = await queued(app)
    unreadable = {"once": True}
    readable = FakeRuns.claim_to_execute

    async def claim_to_execute(self: FakeRuns, org_id: OrgId, run_id: RunId) -> ClaimedToExecute | None:
        if unreadable.pop("once", False):  # (the agent is read with the claim)
            raise ValueError("a stored agent this version cannot read")
        return await readable(self, org_id, run_id)

    monkeypatch.setattr(FakeRuns, "claim_to_execute", claim_to_execute)
    failed = await app.execute_run().execute(run.org_id, run.id)

    assert status(failed) is RunStatus.FAILED and failed.error is not None
    assert failed.error.code == "internal_error" and "could not start" in failed.error.message
    async with app.uow.read_only() as uow:
        assert await uow.runs.get(run.org_id, run.id) == failed
    ended = app.bus.published[-1].payload
    assert isinstance(ended, RunFailed) and ended.error.code == "internal_error"
    assert "a stored agent this version cannot read" in caplog.text  # the server's log says which
    app.model.then(answer("Hi"))
    after = await start(app, agent, thread, "Again")
    assert status(await app.execute_run().execute(after.org_id, after.id)) is RunStatus.COMPLETED


async def test_a_run_left_in_progress_goes_on_with_a_model_call(app: FakeApp) -> None:
    app.model.then(answer("Back again"))
    _, _thread, run = await queued(app)
    async with app.uow as uow:
        started = await uow.runs.get(run.org_id, run.id)
        assert started is not None
        started.start(app.clock.now())
        await uow.runs.save(started)
        await uow.commit()
    done = await app.execute_run().execute(run.org_id, run.id)
    assert status(done) is RunStatus.COMPLETED
    assert app.bus.types(run.id) == [
        "run.created",
        "run.in_progress",
        "message.delta",
        "message.delta",
        "run.completed",
    ]
    resumed = [e for e in app.bus.published if e.run_id == run.id][1:]
    # Numbered past whatever a lost holder may have published without storing, from the stored announcement.
    assert resumed[0].seq == 1 + UNSTORED_SEQS + 1
    assert [e.seq for e in resumed] == list(range(resumed[0].seq, resumed[0].seq + 4))


# -- what a run stores and traces --------------------------------------------------------------------


async def test_the_answer_with_tool_calls_is_one_message_and_each_call_a_step_entry(app: FakeApp) -> None:
    app.model.then(calls(call("command__check"), call("command__deploy"), text="Let me look."), answer("ok"))
    _, thread, run = await queued(app, **commands_agent())
    done = await app.execute_run().execute(run.org_id, run.id)
    assistant = (await history(app, thread))[1]
    assert assistant.text == "Let me look." and assistant.run_id == run.id
    assert [p.name for p in assistant.content if isinstance(p, ToolUseContent)] == ["command__check", "command__deploy"]
    assert [c.name for c in done.steps[0].tool_calls] == ["command__check", "command__deploy"]


async def test_a_trace_shows_the_run_its_model_calls_and_its_tool_calls(app: FakeApp) -> None:
    app.model.then(calls(call("command__check")), answer("ok"))
    agent, _, run = await queued(app, **commands_agent())
    done = await app.execute_run().execute(run.org_id, run.id)
    trace = app.tracer.of(run.id)
    assert done.trace_id == trace.trace_id and (await stored(app, run)).trace_id == trace.trace_id
    assert trace.metadata == {"agent": agent.slug, "model": agent.model, "parent_run_id": ""}
    assert [g.name for g in trace.generations] == ["step 1", "step 2"]
    assert trace.generations[1].input[-1] == {"role": "tool", "content": ""}
    assert [s.name for s in trace.spans] == ["command"]
    assert trace.ended == {"output": "completed", "level": Level.DEFAULT, "status_message": None}


async def test_a_model_call_trace_shows_only_the_latest_messages(app: FakeApp) -> None:
    app.model.then(answer("ok"))
    org = await app.organization()
    agent = await app.agent(org)
    thread = await app.thread(agent)
    async with app.uow as uow:
        loaded = await uow.threads.get(thread.org_id, thread.id)
        assert loaded is not None
        for n in range(30):
            text = (TextContent(text=f"earlier {n}"),)
            await uow.messages.add(loaded.append(MessageRole.USER, text, message_id=MessageId(app.ids.new()), now=NOW))
        await uow.threads.save(loaded)
        await uow.commit()
    run = await start(app, agent, thread, "last")
    await app.execute_run().execute(run.org_id, run.id)
    shown = app.tracer.of(run.id).generations[0].input
    assert len(shown) == 20 and shown[-1] == {"role": "user", "content": "last"}


# -- a run another process left in progress --------------------------------------------------------


async def left_in_progress(app: FakeApp, *, calls_in_flight: bool) -> tuple[Thread, Run]:
    """A run that a process began (and maybe asked the model for tool calls) before it was lost."""
    _agent, thread, run = await queued(app, "Deploy it", **commands_agent())
    async with app.uow as uow:
        stored_run = await uow.runs.get(run.org_id, run.id, for_update=True)
        stored_thread = await uow.threads.get(thread.org_id, thread.id, for_update=True)
        assert stored_run is not None and stored_thread is not None
        stored_run.start(app.clock.now())
        await uow.runs.save(stored_run)
        if calls_in_flight:
            content = (ToolUseContent(id="call_1", name="deploy", params={}),)
            message = stored_thread.append(
                MessageRole.ASSISTANT, content, message_id=MessageId(app.ids.new()), now=NOW, run_id=run.id
            )
            await uow.threads.save(stored_thread)
            await uow.messages.add(message)
        await uow.commit()
    return thread, run


async def test_a_run_left_between_steps_is_resumed_with_a_model_call(app: FakeApp) -> None:
    thread, run = await left_in_progress(app, calls_in_flight=False)
    app.model.then(answer("Deployed"))
    done = await app.execute_run().execute(run.org_id, run.id)
    assert status(done) is RunStatus.COMPLETED
    assert [m.role for m in await history(app, thread)] == [MessageRole.USER, MessageRole.ASSISTANT]
    assert app.bus.types(run.id)[-1] == "run.completed"


async def test_a_run_left_during_its_tool_calls_fails_as_worker_lost_without_calling_them_again(
    app: FakeApp,
) -> None:
    _thread, run = await left_in_progress(app, calls_in_flight=True)
    done = await app.execute_run().execute(run.org_id, run.id)
    assert status(done) is RunStatus.FAILED and done.error is not None and done.error.code == "worker_lost"
    assert app.model.requests == [] and app.commands.runs == []
    assert app.bus.types(run.id)[-1] == "run.failed"
    assert (await stored(app, run)).error == done.error


@pytest.mark.parametrize("cancelled", [False, True], ids=["lost", "lost-after-its-cancel"])
async def test_a_run_whose_live_question_died_with_its_process_fails_as_worker_lost_or_ends_as_its_cancel_asked(
    app: FakeApp, cancelled: bool
) -> None:
    """A question asked during a call (`elicitation/create`) is held by the call, in the process that executes the
    run: when that process is lost, the next taker of the run ends it. A cancel its user requested meanwhile (it
    could not stop the call: the process was gone) is what the run ends with."""
    _agent, _thread, run = await queued(app, "Plan the party", **commands_agent())
    async with app.uow as uow:
        stored_run = await uow.runs.get(run.org_id, run.id, for_update=True)
        assert stored_run is not None
        stored_run.start(NOW)
        question = Elicitation.asked(
            tool_call_id="call_1", tool_name="plan", key="party", message="How many?", requested_schema={}, live=True
        )
        stored_run.ask_live(question, NOW)
        await uow.runs.save(stored_run)
        if cancelled:  # as CancelRun stores it
            await uow.runs.request_cancel(run.org_id, run.id)
        await uow.commit()
    done = await app.execute_run().execute(run.org_id, run.id)
    if cancelled:
        assert status(done) is RunStatus.CANCELLED and app.bus.types(run.id)[-1] == "run.cancelled"
    else:
        assert status(done) is RunStatus.FAILED and done.error is not None and done.error.code == "worker_lost"
    assert app.model.requests == [] and app.commands.runs == []


async def under_way(
    app: FakeApp, run: Run, *, delegated_by: Run | None = None, delegating: bool = False, cancelled: bool = False
) -> None:
    """The run stored as a process left it when it was lost: in progress, as the sub-agent of `delegated_by`;
    `delegating`: its step's call to a sub-agent in flight; `cancelled`: its cancel requested meanwhile."""
    async with app.uow as uow:
        stored_run = await uow.runs.get(run.org_id, run.id, for_update=True)
        stored_thread = await uow.threads.get(run.org_id, run.thread_id, for_update=True)
        assert stored_run is not None and stored_thread is not None
        stored_run.start(NOW)
        stored_run.parent_run_id = delegated_by.id if delegated_by is not None else None
        if delegating:
            delegation = StepToolCall(id="call_1", name="agent__helper", type=ToolType.AGENT)
            step = RunStep(
                number=1,
                model="scripted-1",
                usage=Usage(),
                finish_reason="tool_calls",
                started_at=NOW,
                completed_at=NOW,
                tool_calls=(delegation,),
            )
            stored_run.record_step(step, NOW)
            content = (ToolUseContent(id="call_1", name="agent__helper", params={"input": "Dig"}),)
            message = stored_thread.append(
                MessageRole.ASSISTANT, content, message_id=MessageId(app.ids.new()), now=NOW, run_id=run.id
            )
            await uow.threads.save(stored_thread)
            await uow.messages.add(message)
        await uow.runs.save(stored_run)
        if cancelled:
            await uow.runs.request_cancel(run.org_id, run.id)
        await uow.commit()


async def test_the_sub_agents_runs_a_lost_process_left_under_way_end_when_the_run_that_delegated_is_taken_on(
    app: FakeApp,
) -> None:
    """A sub-agent's run executes in the task of the run that delegated to it, which alone wants its answer: when
    their process is lost during the delegation, the next taker of the delegating run (which fails: its call was in
    flight) ends the sub-agent's run, and the runs that one delegated to in turn (cancelled, when that was asked),
    each claimed; a run of another thread is left alone."""
    org = await app.organization()
    lead, helper = await app.agent(org), await app.agent(org)
    parent = await start(app, lead, await app.thread(lead), "Delegate")
    child = await start(app, helper, await app.thread(helper), "Dig")
    grandchild = await start(app, helper, await app.thread(helper), "Dig deeper")
    other = await start(app, helper, await app.thread(helper), "Unrelated")
    await under_way(app, parent, delegating=True)
    await under_way(app, child, delegated_by=parent, delegating=True)
    await under_way(app, grandchild, delegated_by=child, cancelled=True)
    await under_way(app, other)
    done = await app.execute_run().execute(parent.org_id, parent.id)
    assert status(done) is RunStatus.FAILED and done.error is not None and done.error.code == "worker_lost"
    assert app.model.requests == []
    ended = await stored(app, child)
    assert status(ended) is RunStatus.FAILED and ended.error is not None and ended.error.code == "worker_lost"
    assert ended.lease == child.lease + 1  # claimed: whoever held it can no longer write it
    assert status(await stored(app, grandchild)) is RunStatus.CANCELLED
    assert [app.bus.types(r.id)[-1] for r in (child, grandchild)] == ["run.failed", "run.cancelled"]
    child_end = [e for e in app.bus.published if e.run_id == child.id][-1]
    assert child_end.seq > UNSTORED_SEQS  # past any event its holder may have published unstored
    assert status(await stored(app, other)) is RunStatus.IN_PROGRESS


async def handed_back_during_its_call(app: FakeApp, server: LookupServer, run: Run) -> None:
    """Execute the run until its read-only call is open (its step stored), then hand it back, as a stopping worker
    does: the run stays as stored."""
    server.began.clear()
    async with app.bus.subscribe(run.id) as follower:
        task = asyncio.create_task(app.execute_run().execute(run.org_id, run.id))
        async with asyncio.timeout(10):
            await server.began.wait()
            while not any(e.type.value == "tool_call.started" for e in await stored_events(app, run)):
                await follower.next()  # (the step is stored before its events are told)
    task.cancel(HANDED_BACK)
    with pytest.raises(asyncio.CancelledError):
        await task


async def stored_events(app: FakeApp, run: Run) -> list[Any]:
    async with app.uow.read_only() as uow:
        return list(await uow.run_events.list(run.org_id, run.id))


async def test_a_run_left_during_tool_calls_that_only_read_makes_them_again_and_goes_on() -> None:
    """Its holder stopped (here: handed back) after the step asking for a read-only call was stored, while the
    call was open: whoever takes the run makes the call again, and the run completes."""
    answering = asyncio.Event()
    server = LookupServer(read_only=True, answering=answering)  # the first call does not answer
    app, thread, run = await lookup_run(server)
    app.model.then(calls(call("memo__lookup")), answer("Found it"))
    await handed_back_during_its_call(app, server, run)
    assert server.cancelled
    assert [m.role for m in await history(app, thread)] == [MessageRole.USER, MessageRole.ASSISTANT]

    answering.set()
    done = await app.execute_run().execute(run.org_id, run.id)

    assert status(done) is RunStatus.COMPLETED
    assert len(server.stored_when_called) == 2  # made again, its step stored
    assert server.stored_when_called[1] == [MessageRole.USER, MessageRole.ASSISTANT]
    roles = [m.role for m in await history(app, thread)]
    assert roles == [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL, MessageRole.ASSISTANT]
    assert len(app.model.requests) == 2  # the model was not asked again for the calls


async def test_read_only_calls_in_flight_are_made_again_once_only() -> None:
    """A run whose holder stops during the calls made again fails as worker_lost: a call that stops every process
    making it is not made forever."""
    server = LookupServer(read_only=True, answering=asyncio.Event())  # no call answers
    app, thread, run = await lookup_run(server)
    app.model.then(calls(call("memo__lookup")), answer("never asked"))
    await handed_back_during_its_call(app, server, run)
    await handed_back_during_its_call(app, server, run)  # made again, and stopped again

    async with asyncio.timeout(10):  # (a call made a third time would not answer)
        done = await app.execute_run().execute(run.org_id, run.id)

    assert status(done) is RunStatus.FAILED and done.error is not None and done.error.code == "worker_lost"
    assert len(server.stored_when_called) == 2 and len(app.model.requests) == 1
    assert [m.role for m in await history(app, thread)] == [MessageRole.USER, MessageRole.ASSISTANT]


async def test_calls_in_flight_whose_tool_no_longer_only_reads_are_not_made_again() -> None:
    server = LookupServer(read_only=True, answering=asyncio.Event())
    app, _thread, run = await lookup_run(server)
    app.model.then(calls(call("memo__lookup")), answer("never asked"))
    await handed_back_during_its_call(app, server, run)
    server.tools = [replace(info, read_only=False) for info in server.tools]  # its server says otherwise now

    async with asyncio.timeout(10):  # (a call made again would not answer)
        done = await app.execute_run().execute(run.org_id, run.id)

    assert status(done) is RunStatus.FAILED and done.error is not None and done.error.code == "worker_lost"
    assert len(server.stored_when_called) == 1 and len(app.model.requests) == 1
