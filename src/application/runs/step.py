"""A run as its loop holds it between steps, and what a step leads to."""

import asyncio
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from application.ports.persistence import HistorySummary
from application.ports.tracing import RunTrace
from application.runs.events import RunEventStream
from application.runs.tools.assembly import AssembledTools
from application.runs.tools.handler import ToolContext
from domain.agents import Agent
from domain.messages import Message
from domain.runs import Run


class StepOutcome(Enum):
    """What follows a step. Each outcome is stored before it is returned."""

    CONTINUE = "continue"
    """The model is called again (the step's tool results are stored)."""
    WAIT_FOR_CLIENT = "wait_for_client"
    """The run requires action: the client sends the results of its tools, and the run is resumed."""
    FINISHED = "finished"
    """The model answered without tool calls: the run completed."""
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(kw_only=True)
class RunState:
    """The run being executed, its agent, the tools it offers, and the thread as the model sees it."""

    run: Run
    agent: Agent
    history: list[Message]
    """The thread's messages, read once when the run starts; each step appends what it stores."""
    thread_messages: int
    """The count of its thread's messages: the run numbers those it appends (while it is active, it is the thread's
    only writer), read when it starts; each step counts what it stores."""
    events: RunEventStream
    trace: RunTrace
    tools: AssembledTools = field(default_factory=AssembledTools)
    """The tools offered to the model, assembled when the loop starts."""
    depth: int = 0
    """How deep in delegation this run is: 0 for a run started by a client, 1 for its sub-agents' runs..."""
    live_questions: bool = True
    """Whether its open tool calls may wait for the user's answers to their servers' questions."""
    storing: "asyncio.Future[Any] | None" = None
    """The last step's tool results being stored beside the next model call (see RunRecorder), if they are; or,
    for a run that executes as the transaction creating it commits, that commit (Began.created)."""
    history_summary: HistorySummary | None = None
    """The thread's summary of its oldest messages (read when the agent summarizes what requests leave out), as
    the run's steps extend it."""

    @property
    def tool_context(self) -> ToolContext:
        run = self.run
        return ToolContext(
            org_id=run.org_id,
            run_id=run.id,
            thread_id=run.thread_id,
            agent=self.agent,
            trace=self.trace,
            depth=self.depth,
        )
