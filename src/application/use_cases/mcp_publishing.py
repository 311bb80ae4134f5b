"""What an organization publishes over MCP: its agents (publish_as_mcp) and its prompt templates,
each as a tool and as a prompt."""

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from application.caller import Caller
from application.errors import PublishedNotFound, RunNotFound
from application.ports.limits import NoRunRateLimit, RateLimited, RunRateLimit
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock
from application.ports.template_files import TemplateFiles
from application.runs.answer_questions import QuestionAnswer
from application.runs.ask_agent import Answer, Answerer, AskAgent, Progress, Question, Resumption
from application.use_cases.prompt_templates import TemplateView, all_templates
from domain.agents import Agent
from domain.elicitation import Elicitation
from domain.errors import DomainError, InvalidValue
from domain.ids import RunId
from domain.mcp_prompts import PromptMessage, PromptResult
from domain.prompt_templates import ArgumentType, MissingArguments, joined
from domain.runs import Run

logger = logging.getLogger(__name__)

AGENT_INPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
}
COMPLETIONS_MAX = 100


def agent_description(agent: Agent) -> str:
    if agent.description:
        return agent.description
    first = agent.instructions.strip().split("\n", 1)[0]
    sentence = first.split(". ", 1)[0].strip()
    return sentence if sentence.endswith(".") or not sentence else sentence + "."


@dataclass(frozen=True, kw_only=True)
class PublishedTool:
    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class PublishedPromptArgument:
    name: str
    description: str
    required: bool


@dataclass(frozen=True, kw_only=True)
class PublishedPrompt:
    name: str
    description: str
    arguments: Sequence[PublishedPromptArgument] = ()


@dataclass(frozen=True, kw_only=True)
class Published:
    agents: Sequence[Agent]
    templates: Sequence[TemplateView]

    @property
    def tools(self) -> list[PublishedTool]:
        tools = [
            PublishedTool(name=a.slug, description=agent_description(a), input_schema=AGENT_INPUT_SCHEMA)
            for a in self.agents
        ]
        tools += [
            PublishedTool(
                name=v.template.tool_name, description=v.template.description, input_schema=v.template.input_schema()
            )
            for v in self.templates
        ]
        return tools

    @property
    def prompts(self) -> list[PublishedPrompt]:
        prompts = [PublishedPrompt(name=a.slug, description=agent_description(a)) for a in self.agents]
        prompts += [
            PublishedPrompt(
                name=v.template.name,
                description=v.template.description,
                arguments=tuple(
                    PublishedPromptArgument(name=a.name, description=a.description, required=a.required)
                    for a in v.template.arguments
                ),
            )
            for v in self.templates
        ]
        return prompts


async def published(uow: UnitOfWork, files: TemplateFiles, caller: Caller) -> Published:
    agents = list(await uow.agents.published(caller.org_id))
    taken = {a.slug for a in agents}
    templates = []
    for view in await all_templates(uow, files, caller.org_id):
        names = {view.template.name, view.template.tool_name}
        if names & taken:
            logger.warning(
                "prompt template hidden: its MCP name collides with an agent",
                extra={"template": view.template.name, "org_id": str(caller.org_id)},
            )
            continue
        templates.append(view)
    return Published(agents=agents, templates=templates)


class ListPublished:
    def __init__(self, uow: UnitOfWork, files: TemplateFiles) -> None:
        self._uow, self._files = uow, files

    async def execute(self, caller: Caller) -> Published:
        async with self._uow.read_only() as uow:
            return await published(uow, self._files, caller)


@dataclass(frozen=True, kw_only=True)
class ResumedCall:
    run_id: RunId
    answers: Sequence[QuestionAnswer]


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    caller: Caller
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    progress: Progress | None = None
    answerer: Answerer | None = None
    """Asks the caller, now, what the run's tools ask the user (handshake-era clients that can be asked)."""
    answers_later: bool = False
    """The caller answers in a call of its own (2026-07-28 clients): a run that asks is left waiting, and the
    answer names its questions."""
    resume: ResumedCall | None = None
    """This call answers the questions of a run an earlier call left waiting."""


@dataclass(frozen=True, kw_only=True)
class ToolAnswer:
    text: str
    is_error: bool
    run: Run | None = None
    questions: tuple[Elicitation, ...] = ()
    """What the run (left waiting) asks the caller: answer in a call of its own"""


def _answered(answer: Answer) -> ToolAnswer:
    return ToolAnswer(text=answer.text, is_error=answer.failed, run=answer.run, questions=answer.questions)


def _template_arguments(view: TemplateView, raw: Mapping[str, Any]) -> dict[str, str | list[str]]:
    values: dict[str, str | list[str]] = {}
    for name, value in raw.items():
        argument = view.template.argument(name)
        if argument is None:
            continue  # undeclared arguments are ignored, as their placeholders are
        if argument.type is ArgumentType.ARRAY:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
                raise InvalidValue(f"argument {name!r} must be a list of strings")
            values[name] = [str(v) for v in value]
        else:
            if not isinstance(value, str | int | float | bool):
                raise InvalidValue(f"argument {name!r} must be a string")
            values[name] = str(value)
    return values


class CallPublishedTool:
    """A published agent answers `input`; a template is rendered and answered by its agent. Either way
    as a real run in a fresh thread. Failures are answers with is_error, not exceptions."""

    def __init__(
        self, uow: UnitOfWork, clock: Clock, files: TemplateFiles, ask: AskAgent, rate_limit: RunRateLimit | None = None
    ) -> None:
        self._uow, self._clock, self._files, self._ask = uow, clock, files, ask
        self._rate_limit = rate_limit or NoRunRateLimit()

    async def execute(self, call: ToolCall) -> ToolAnswer:
        if call.resume is not None:
            return await self._resume(call, call.resume)
        try:
            await self._rate_limit.take(call.caller.org_id)  # each call is a run of the organization
        except RateLimited as error:
            return ToolAnswer(text=f"{error.detail} (retry after {error.retry_after_seconds} s)", is_error=True)
        async with self._uow.read_only() as uow:
            catalog = await published(uow, self._files, call.caller)
            agent = next((a for a in catalog.agents if a.slug == call.name), None)
            view = next((v for v in catalog.templates if v.template.tool_name == call.name), None)
            template_agent = await self._template_agent(uow, call.caller, view) if view else None
        if agent is not None:
            text = call.arguments.get("input")
            if not isinstance(text, str) or not text.strip():
                return ToolAnswer(text="input is required: the task for the agent, as text", is_error=True)
            answer = await self._ask.execute(
                Question(
                    agent=agent,
                    input=text,
                    title=f"MCP call of {agent.slug}",
                    progress=call.progress,
                    answerer=call.answerer,
                    answers_later=call.answers_later,
                )
            )
            return _answered(answer)
        if view is None:
            raise PublishedNotFound(f"no published tool named {call.name!r}")
        if template_agent is None:
            return ToolAnswer(text=f"template {view.template.name!r} has no agent to answer it", is_error=True)
        try:
            values = _template_arguments(view, call.arguments)
            messages = view.template.render(values)
        except (MissingArguments, InvalidValue) as error:
            return ToolAnswer(text=error.detail, is_error=True)
        await self._remember(call.caller, view, values)
        title = f"Prompt template {view.template.name}"
        answer = await self._ask.execute(
            Question(
                agent=template_agent,
                input=joined(messages),
                title=title,
                progress=call.progress,
                answerer=call.answerer,
                answers_later=call.answers_later,
            )
        )
        return _answered(answer)

    async def _resume(self, call: ToolCall, resumed: ResumedCall) -> ToolAnswer:
        try:
            answer = await self._ask.resume(
                Resumption(
                    caller=call.caller,
                    run_id=resumed.run_id,
                    answers=resumed.answers,
                    progress=call.progress,
                    answerer=call.answerer,
                )
            )
        except (RunNotFound, DomainError) as error:
            return ToolAnswer(text=error.detail, is_error=True)
        return _answered(answer)

    @staticmethod
    async def _template_agent(uow: UnitOfWork, caller: Caller, view: TemplateView) -> Agent | None:
        if view.template.agent_id is not None:
            return await uow.agents.get(caller.org_id, view.template.agent_id)
        if view.agent_slug is not None:
            return await uow.agents.get_by_slug(caller.org_id, view.agent_slug)
        return None

    async def _remember(self, caller: Caller, view: TemplateView, values: Mapping[str, str | list[str]]) -> None:
        remembered = [(a.name, values[a.name]) for a in view.template.arguments if a.remember and a.name in values]
        if not remembered:
            return
        async with self._uow as uow:
            for name, value in remembered:
                items = [value] if isinstance(value, str) else value
                await uow.argument_values.remember(caller.org_id, view.template.name, name, items, self._clock.now())
            await uow.commit()


class GetPublishedPrompt:
    def __init__(self, uow: UnitOfWork, files: TemplateFiles) -> None:
        self._uow, self._files = uow, files

    async def execute(self, caller: Caller, name: str, arguments: Mapping[str, str]) -> PromptResult:
        async with self._uow.read_only() as uow:
            catalog = await published(uow, self._files, caller)
        agent = next((a for a in catalog.agents if a.slug == name), None)
        if agent is not None:
            text = agent.instructions or f"You are {agent.name}."
            return PromptResult(
                description=agent_description(agent), messages=(PromptMessage(role="user", content=text),)
            )
        view = next((v for v in catalog.templates if v.template.name == name), None)
        if view is None:
            raise PublishedNotFound(f"no published prompt named {name!r}")
        text = view.template.instructions(arguments)
        return PromptResult(description=view.template.description, messages=(PromptMessage(role="user", content=text),))


class CompleteArgument:
    """Suggestions for a template argument that declares autocomplete: its own list, then the values the
    organization used before, matching what was typed so far."""

    def __init__(self, uow: UnitOfWork, files: TemplateFiles) -> None:
        self._uow, self._files = uow, files

    async def execute(self, caller: Caller, prompt: str, argument: str, typed: str) -> list[str]:
        async with self._uow.read_only() as uow:
            catalog = await published(uow, self._files, caller)
            view = next((v for v in catalog.templates if v.template.name == prompt), None)
            declared = view.template.argument(argument) if view else None
            if view is None or declared is None or not declared.completes:
                return []
            remembered = (
                await uow.argument_values.suggest(caller.org_id, view.template.name, argument, typed, COMPLETIONS_MAX)
                if declared.remember
                else []
            )
        listed = [v for v in declared.autocomplete if v.lower().startswith(typed.lower())]
        return list(dict.fromkeys([*listed, *remembered]))[:COMPLETIONS_MAX]
