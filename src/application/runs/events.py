"""A run's events: numbered in order, stored with what they announce, published after commit."""

from application.ports.execution import RunEventBus
from application.ports.persistence import UnitOfWork
from application.ports.system import Clock
from domain.ids import OrgId, RunId
from domain.run_events import RunEvent, RunEventPayload, run_ended
from domain.runs import Run


class RunEventStream:
    """Numbers one run's events in order. Events are stored in the unit of work that records what they
    announce (text deltas are not stored: the message they build is), and published after commit."""

    def __init__(self, org_id: OrgId, run_id: RunId, last_seq: int, bus: RunEventBus, clock: Clock) -> None:
        self._org_id, self._run_id = org_id, run_id
        self._seq = last_seq
        self._bus, self._clock = bus, clock

    @classmethod
    async def resume(
        cls, uow: UnitOfWork, org_id: OrgId, run_id: RunId, bus: RunEventBus, clock: Clock
    ) -> "RunEventStream":
        return cls(org_id, run_id, await uow.run_events.last_seq(run_id), bus, clock)

    def make(self, payload: RunEventPayload) -> RunEvent:
        self._seq += 1
        return RunEvent(run_id=self._run_id, seq=self._seq, payload=payload, created_at=self._clock.now())

    async def record(self, uow: UnitOfWork, payload: RunEventPayload) -> RunEvent:
        event = self.make(payload)
        await uow.run_events.add(event, self._org_id)
        return event

    async def publish(self, *events: RunEvent) -> None:
        for event in events:
            await self._bus.publish(event)


async def store_ending(uow: UnitOfWork, run: Run, bus: RunEventBus, clock: Clock) -> RunEvent:
    """Inside the caller's unit of work: store a run that just ended (not by its own loop: cancelled while
    it waited, interrupted by a stopped process) with the event that says so. The caller publishes it after
    commit."""
    events = await RunEventStream.resume(uow, run.org_id, run.id, bus, clock)
    event = await events.record(uow, run_ended(run))
    await uow.runs.save(run)
    return event
