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

    async def sent(self) -> None:
        """Returns once what this process published so far has left it for the deployment's other processes (at
        once where the events stay in one process). A run's unstored events (text deltas) are sent before the
        commit of what it stores after them: a follower elsewhere that reads the later event from storage can
        then wait for them with `received_all`."""
        ...

    async def received_all(self) -> None:
        """Returns once this process has received what the other processes had sent when it was called (at once
        where the events stay in one process; after a short wait at most while the link to them is down)."""
        ...


class RunSlot(Protocol):
    """A place to execute one run in this process, taken before the run is stored: the run is stored as started,
    in the transaction that creates it, and executes at once (no second transaction to start it)."""

    def start(self, run_id: RunId, began: object) -> None:
        """Execute the run, from what the transaction that started it read (application.runs.recorder.Began)."""
        ...

    def release(self) -> None:
        """Give the place back unused (the run was not created, or not started here)."""
        ...


class RunExecutor(Protocol):
    """Executes queued (or resumed) runs somewhere: in this process, or on workers."""

    async def submit(self, org_id: OrgId, run_id: RunId) -> None: ...

    async def reserve(self, org_id: OrgId) -> RunSlot | None:
        """A slot to execute a new run of the organization here at once, when one is free now; None when the
        run is to be queued and submitted (no slot free, the organization's runs wait their turn, or runs execute
        on workers)."""
        ...

    async def cancel(self, run_id: RunId) -> bool:
        """Stop the run's execution if it runs here; True when it did (the run records itself cancelled). Called
        only once the run's cancel is stored (see CancelRun): a run that waits to execute here may be executed at
        once, only to record that end."""
        ...
