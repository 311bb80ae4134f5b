"""Ports of run execution: where runs execute, and how their events reach listeners."""

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from domain.ids import OrgId, RunId
from domain.run_events import RunEvent

INTERRUPTED = "threadline:interrupted"
"""The message a run's task is cancelled with when its process shuts down: the run fails as interrupted
(a task cancelled without it is a user's cancel)."""
HANDED_BACK = "threadline:handed-back"
"""The message a run's task is cancelled with when its worker stops and hands the run back to the queue: the
run stays as stored, and another worker resumes it from its last step."""


class RunSubscription(Protocol):
    @property
    def backlog(self) -> Sequence[RunEvent]:
        """The run's recent events the bus still held when the subscription began (text deltas included)."""
        ...

    async def next(self) -> RunEvent:
        """The next event published after the subscription began."""
        ...

    def received(self) -> list[RunEvent]:
        """The events published after the subscription began that arrived and were not taken yet (taking them)."""
        ...


class RunEventBus(Protocol):
    """Delivers run events to whoever follows a run (SSE clients), in any process of the deployment."""

    async def publish(self, event: RunEvent) -> None: ...

    def subscribe(self, run_id: RunId) -> AbstractAsyncContextManager[RunSubscription]:
        """Follow a run until the context is left. Entering does not wait."""
        ...


class RunExecutor(Protocol):
    """Executes queued (or resumed) runs somewhere: in this process, or on workers."""

    async def submit(self, org_id: OrgId, run_id: RunId) -> None: ...

    async def cancel(self, run_id: RunId) -> bool:
        """Stop the run's execution if it runs here; True when it did (the run records itself cancelled)."""
        ...
