"""Delegation: a sub-agent answers a task in a thread of its own, as a run of its own."""

from uuid import UUID

from application.ports.llm import ModelToolCall
from application.ports.persistence import UnitOfWork
from application.ports.tracing import Level
from application.runs.ask_agent import AskAgent, Question
from application.runs.tools.handler import ToolContext, ToolOutcome
from domain.ids import AgentId
from domain.tools import Tool

MAX_DELEGATION_DEPTH = 3


def _failed(reason: str) -> ToolOutcome:
    return ToolOutcome(text=f"Delegation failed: {reason}", is_error=True)


class SubAgentCall:
    def __init__(self, uow: UnitOfWork, ask: AskAgent, max_depth: int = MAX_DELEGATION_DEPTH) -> None:
        self._uow, self._ask, self._max_depth = uow, ask, max_depth

    async def __call__(self, call: ModelToolCall, tool: Tool, context: ToolContext) -> ToolOutcome:
        task = str(call.arguments.get("input") or "").strip()
        if not task:
            return _failed("input parameter is required")
        if context.depth >= self._max_depth:
            return _failed("agents may delegate only so deep")
        agent_id = str(tool.metadata["agent_id"])
        span = context.trace.span("sub_agent", input={"input": task}, metadata={"agentId": agent_id})
        async with self._uow.read_only() as uow:
            sub_agent = await uow.agents.get(context.org_id, AgentId(UUID(agent_id)))
        if sub_agent is None:
            span.end(level=Level.ERROR, status_message="the agent no longer exists")
            return _failed("the agent no longer exists")
        answer = await self._ask.execute(
            Question(
                agent=sub_agent,
                input=task,
                title=f"Delegated by {context.agent.name}",
                parent_run_id=context.run_id,
                depth=context.depth + 1,
            )
        )
        metadata = {"childRunId": str(answer.run.id)}
        if answer.failed:
            span.end(level=Level.ERROR, status_message=answer.text, metadata=metadata)
            return _failed(answer.text)
        span.end(output=answer.text, metadata=metadata)
        return ToolOutcome(text=answer.text, data={"run_id": str(answer.run.id)})
