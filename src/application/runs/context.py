from dataclasses import dataclass

from application.ports.tracing import RunTrace
from domain.agents import Agent
from domain.ids import OrgId, RunId, ThreadId


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What a tool call knows about the run it belongs to."""

    org_id: OrgId
    run_id: RunId
    thread_id: ThreadId
    agent: Agent
    trace: RunTrace
    depth: int = 0
