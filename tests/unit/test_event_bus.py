"""The in-process run event bus keeps a run's backlog while it may be followed, and forgets it a while after the
run ended."""

import time
from uuid import uuid4

import pytest

from domain.ids import AgentId, RunId, ThreadId
from domain.run_events import RunCompleted, RunEvent, RunInProgress
from infrastructure.execution import event_bus
from infrastructure.execution.event_bus import InMemoryRunEventBus
from tests import builders


def test_a_run_whose_earlier_event_arrives_after_its_end_is_still_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    """From another process, a run's last event may come before an earlier one (a worker's end before the API's
    first events): the run ended all the same, and its backlog goes once it ended a while ago."""
    now = [1_000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    bus = InMemoryRunEventBus()
    org = builders.organization()
    run = builders.run(org.id, ThreadId(uuid4()), AgentId(uuid4()))
    at = run.created_at
    bus.deliver(
        RunEvent(run_id=run.id, seq=3, payload=RunCompleted(**RunCompleted.summary(run), answer="done"), created_at=at)
    )
    bus.deliver(RunEvent(run_id=run.id, seq=2, payload=RunInProgress.of(run), created_at=at))
    now[0] += event_bus.KEEP_AFTER_END_SECONDS + 1
    other = RunId(uuid4())
    bus.deliver(RunEvent(run_id=other, seq=1, payload=RunInProgress.of(run), created_at=at))  # the bus looks back
    assert run.id not in bus._channels
    assert other in bus._channels
