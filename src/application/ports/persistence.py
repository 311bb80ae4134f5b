"""Repositories and the unit of work. Every tenant read takes the organization id."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from types import TracebackType
from typing import Protocol, Self

from domain.agents import Agent
from domain.api_keys import ApiKey
from domain.audit import AuditAction, AuditEvent
from domain.ids import AgentId, ApiKeyId, IntegrationId, OrgId, RunId, SourceId, ThreadId
from domain.integrations import McpIntegration
from domain.messages import Message
from domain.organizations import Organization
from domain.prompt_templates import PromptTemplate
from domain.run_events import RunEvent
from domain.runs import Run, RunStatus
from domain.sources import CreatedBy, Passage, Source, SourceKind, SourceOrigin
from domain.threads import Thread
from domain.usage import Usage


@dataclass(frozen=True)
class ClaimedRun:
    run: Run
    last_event_seq: int
    """The number of the run's last stored event (0: none), read with the claim."""


@dataclass(frozen=True)
class ClaimedToExecute(ClaimedRun):
    agent: Agent | None
    """The run's agent, read with the claim (None: it was deleted)."""


class OrganizationRepository(Protocol):
    async def add(self, org: Organization) -> None: ...
    async def get(self, org_id: OrgId) -> Organization | None: ...
    async def get_by_slug(self, slug: str) -> Organization | None: ...
    async def save_limits(self, org: Organization) -> None: ...
    async def save_search_language(self, org: Organization) -> None: ...


class ApiKeyRepository(Protocol):
    async def add(self, key: ApiKey) -> None: ...
    async def get(self, org_id: OrgId, key_id: ApiKeyId) -> ApiKey | None: ...
    async def find_by_prefix(self, prefix: str) -> ApiKey | None:
        """Across organizations: this is how a presented key finds its tenant."""
        ...

    async def list(self, org_id: OrgId, *, limit: int, after: ApiKeyId | None) -> Sequence[ApiKey]: ...
    async def save(self, key: ApiKey) -> None: ...
    async def touch(self, key: ApiKey) -> None:
        """Store only the key's last_used_at, never undoing a revocation made meanwhile."""
        ...


class AgentRepository(Protocol):
    async def add(self, agent: Agent) -> None: ...
    async def get(self, org_id: OrgId, agent_id: AgentId) -> Agent | None: ...
    async def get_by_slug(self, org_id: OrgId, slug: str) -> Agent | None: ...
    async def published(self, org_id: OrgId) -> Sequence[Agent]:
        """The agents published as MCP tools and prompts."""
        ...

    async def list(self, org_id: OrgId, *, limit: int, after: AgentId | None) -> Sequence[Agent]: ...
    async def existing_ids(self, org_id: OrgId, ids: Sequence[AgentId]) -> set[AgentId]: ...
    async def referencing_sub_agent(self, org_id: OrgId, agent_id: AgentId) -> Sequence[Agent]: ...
    async def using_integration(self, org_id: OrgId, integration_id: IntegrationId) -> Sequence[Agent]: ...
    async def save(self, agent: Agent) -> None: ...
    async def delete(self, org_id: OrgId, agent_id: AgentId) -> None: ...


@dataclass(frozen=True)
class UnfinishedRun:
    """A thread's run that has not ended, as much of it as refusing another run names."""

    id: RunId
    status: RunStatus


@dataclass(frozen=True)
class ThreadToRun:
    """A thread locked for a new run, with the agent the run would take and its unfinished run, read together
    (one round trip)."""

    thread: Thread
    agent: Agent | None
    """The agent the run would take (the one asked for, else the thread's); None when there is none or it is not
    found in the organization."""
    unfinished: UnfinishedRun | None
    """The thread's run that has not ended, as it stands once the thread is locked. Every transaction that creates
    a run on a thread writes the thread's row: that is how, on PostgreSQL, this read knows it waited for one (and
    reads the runs again)."""


class ThreadRepository(Protocol):
    async def add(self, thread: Thread) -> None: ...
    async def get(self, org_id: OrgId, thread_id: ThreadId, *, for_update: bool = False) -> Thread | None: ...
    async def get_to_run(self, org_id: OrgId, thread_id: ThreadId, agent_id: AgentId | None) -> ThreadToRun | None:
        """The thread locked as `get(for_update=True)` locks it, with the agent `agent_id` names (else the
        thread's) and its unfinished run (see ThreadToRun.unfinished); None when the organization has no such
        thread."""
        ...

    async def list(
        self, org_id: OrgId, *, limit: int, after: ThreadId | None, agent_id: AgentId | None = None
    ) -> Sequence[Thread]: ...
    async def save(self, thread: Thread) -> None: ...
    async def counted(self, org_id: OrgId, thread_id: ThreadId, message_count: int, now: datetime) -> None:
        """Store the thread's count of messages and `now` as its time, with the unit of work's writes: a run
        appended a message (it numbers its thread's messages itself: the only writer while it is active)."""
        ...

    async def delete(self, org_id: OrgId, thread_id: ThreadId) -> None: ...


class MessageRepository(Protocol):
    async def add(self, message: Message) -> None:
        """Stored with the unit of work (it may be sent to the database only when it commits: a refused message
        fails the commit). Reads in the same unit of work see it."""
        ...

    async def last(self, org_id: OrgId, thread_id: ThreadId) -> Message | None:
        """The thread's latest message."""
        ...

    async def list(
        self, org_id: OrgId, thread_id: ThreadId, *, limit: int, after_position: int | None
    ) -> Sequence[Message]: ...


class McpIntegrationRepository(Protocol):
    async def add(self, integration: McpIntegration) -> None: ...
    async def get(self, org_id: OrgId, integration_id: IntegrationId) -> McpIntegration | None: ...
    async def list(self, org_id: OrgId, *, limit: int, after: IntegrationId | None) -> Sequence[McpIntegration]: ...
    async def get_many(self, org_id: OrgId, ids: Sequence[IntegrationId]) -> Sequence[McpIntegration]: ...
    async def save(self, integration: McpIntegration) -> None: ...
    async def delete(self, org_id: OrgId, integration_id: IntegrationId) -> None: ...
    async def all_sealed_credentials(self) -> Sequence[tuple[OrgId, IntegrationId, str]]:
        """Every stored ciphertext, across organizations: for re-encryption after a key rotation."""
        ...

    async def replace_ciphertext(self, org_id: OrgId, integration_id: IntegrationId, ciphertext: str) -> None: ...


@dataclass(frozen=True, kw_only=True)
class SourceSummary:
    """A source without its content, for lists."""

    id: SourceId
    kind: SourceKind
    name: str
    origin: SourceOrigin
    mime_type: str | None
    size: int
    created_by: CreatedBy
    created_at: datetime
    thread_id: ThreadId | None
    agent_id: AgentId | None


class SourceRepository(Protocol):
    async def add(self, source: Source) -> None: ...
    async def get(self, org_id: OrgId, source_id: SourceId) -> Source | None: ...
    async def list(
        self,
        org_id: OrgId,
        *,
        thread_id: ThreadId | None = None,
        agent_id: AgentId | None = None,
        limit: int,
        after: SourceId | None,
    ) -> Sequence[SourceSummary]: ...
    async def find_by_hash(
        self, org_id: OrgId, content_hash: str, *, thread_id: ThreadId | None, agent_id: AgentId | None
    ) -> SourceSummary | None:
        """The thread's (or the agent's) source with this content hash, if there is one."""
        ...

    async def delete(self, org_id: OrgId, source_id: SourceId) -> bool:
        """Deletes the source and its passages; False when there was none."""
        ...


@dataclass(frozen=True, kw_only=True)
class SearchScope:
    """Whose sources a search reads: a thread's and its agent's, or one agent's; maybe one source only."""

    thread_id: ThreadId | None = None
    agent_id: AgentId | None = None
    source_id: SourceId | None = None


@dataclass(frozen=True, kw_only=True)
class PassageHit:
    """A passage a search found, best first, with the source it comes from."""

    source_id: SourceId
    source_name: str
    passage: Passage
    snippet: str
    """The passage's words around the query's terms"""
    score: float
    """Higher is better; only comparable within one search"""


class PassageRepository(Protocol):
    async def replace(self, source: Source, passages: Sequence[Passage]) -> None:
        """The source's passages become these (indexed for full-text search)."""
        ...

    async def list(self, org_id: OrgId, source_id: SourceId, *, limit: int, after: int | None) -> Sequence[Passage]:
        """The source's passages in order, from the one after position `after`."""
        ...

    async def unindexed(self, *, limit: int, after: SourceId | None) -> Sequence[tuple[OrgId, SourceId]]:
        """Sources with text or a table and no passages (stored before sources were indexed), by id, after
        `after`; across organizations: for the operator's upgrade."""
        ...

    async def language_changed(self, org_id: OrgId) -> None:
        """Index the organization's passages again in its search language, as now stored (PostgreSQL; SQLite's
        index stems English words whatever the language)."""
        ...

    async def search(self, org_id: OrgId, scope: SearchScope, query: str, *, limit: int) -> Sequence[PassageHit]:
        """Full-text search: the best passages for the query's words, in the organization's language.
        Any text is a valid query (operators a user typed are words like the others)."""
        ...


@dataclass(frozen=True, kw_only=True)
class PassageToEmbed:
    """A passage taken to be embedded: its row id and the text its vector is made of."""

    id: int
    text: str


@dataclass(frozen=True, kw_only=True)
class EmbeddingState:
    """How far a source's passages are embedded for one model."""

    passages: int
    embedded: int
    failed: int
    """Passages whose last attempt failed (retried later)"""
    error: str | None = None
    """The last failure's message, if any passage failed"""


class PassageVectorRepository(Protocol):
    """Passage embeddings per model. A passage is taken before it is embedded, so processes never embed the same
    passage at once; a process that stops holding one lets it go when its hold ends."""

    async def newest_passage(self) -> int:
        """The highest passage row id (0 when there is none): new passages are always above it."""
        ...

    async def take(self, model: str, *, limit: int, now: datetime, hold_until: datetime) -> Sequence[PassageToEmbed]:
        """Up to `limit` passages without a vector for the model that nobody holds (never taken, or their hold
        ended before `now`), now held until `hold_until`, oldest first; across organizations."""
        ...

    async def store(self, model: str, vectors: Sequence[tuple[int, bytes]], *, now: datetime) -> None:
        """The passages' vectors (float32, unit length), their holds released; passages gone meanwhile are
        skipped."""
        ...

    async def failed(self, model: str, passage_ids: Sequence[int], error: str, *, retry_at: datetime) -> None:
        """The passages could not be embedded: `error` is kept and they are taken again from `retry_at`."""
        ...

    async def nearest(
        self, org_id: OrgId, scope: SearchScope, model: str, vector: bytes, *, limit: int
    ) -> Sequence[PassageHit]:
        """The passages in scope closest in meaning to `vector` (cosine similarity), best first."""
        ...

    async def state(self, org_id: OrgId, source_id: SourceId, model: str | None) -> EmbeddingState:
        """How many passages the source has, and how many are embedded for the model (None: none is)."""
        ...


@dataclass(frozen=True, kw_only=True)
class HistorySummary:
    """A summary of a thread's oldest messages, made when requests could not hold them."""

    covers_upto: int
    """The messages numbered below this are summarized."""
    text: str


class ThreadSummaryRepository(Protocol):
    async def get(self, org_id: OrgId, thread_id: ThreadId) -> HistorySummary | None: ...
    async def save(self, org_id: OrgId, thread_id: ThreadId, summary: HistorySummary, *, now: datetime) -> None:
        """The thread's summary becomes this one (kept only while the thread exists)."""
        ...


class RunRepository(Protocol):
    async def add(self, run: Run) -> None:
        """Raises IdempotencyConflict when the organization already has a run with its idempotency key."""
        ...

    async def get(self, org_id: OrgId, run_id: RunId, *, for_update: bool = False) -> Run | None: ...
    async def find_by_idempotency_key(self, org_id: OrgId, key: str) -> Run | None: ...
    async def list(
        self,
        org_id: OrgId,
        *,
        limit: int,
        after: RunId | None,
        thread_id: ThreadId | None = None,
        agent_id: AgentId | None = None,
        status: RunStatus | None = None,
        created_after: datetime | None = None,  # at or after this instant (aware, UTC)
        created_before: datetime | None = None,  # strictly before this instant (aware, UTC)
    ) -> Sequence[Run]: ...

    async def active_in_thread(self, org_id: OrgId, thread_id: ThreadId) -> Run | None:
        """The thread's run that is queued, in progress or waiting for tool results, if any."""
        ...

    async def unfinished(self, limit: int, after: RunId | None = None) -> Sequence[Run]:
        """Runs, of any organization, that are queued or in progress, or wait for the answer to a question asked
        during an open call, and that no live process holds (for recovery at startup: the runs of processes that
        stopped), in id order from after `after`."""
        ...

    async def stranded(self, silent_seconds: float, limit: int, after: RunId | None = None) -> Sequence[Run]:
        """Where runs execute from a job queue (worker mode; elsewhere none): runs, of any organization, queued or
        in progress, with no job of theirs waiting or executing, whose holder (the process that created, took or
        resumed them last) has not been heard from for `silent_seconds` (by the database's clock, and for as long
        as this process has watched it: at least `silent_seconds` / 2 of its own clock); in id order from after
        `after`."""
        ...

    async def claim_stranded(self, run: Run, silent_seconds: float) -> ClaimedRun | None:
        """`claim` the run only if it is still as `stranded` found it: its lease unchanged (no one took it since),
        and stranded still (its holder silent as `stranded` last saw it, no job of its own). Only a run that
        `stranded` gave is claimed."""
        ...

    async def unfinished_children(self, org_id: OrgId, run_id: RunId) -> Sequence[RunId]:
        """The runs it delegated to (sub-agents' runs) that have not ended."""
        ...

    async def claim(self, org_id: OrgId, run_id: RunId) -> ClaimedRun | None:
        """Take the run to execute it: lock it, as `get(for_update=True)` does, and bump its lease, so the writes
        of whoever held it before are refused from now on; with the number of its last stored event."""
        ...

    async def claim_to_execute(self, org_id: OrgId, run_id: RunId) -> ClaimedToExecute | None:
        """`claim`, with the run's agent (in the same statement where the database allows: one round trip fewer as
        a worker takes a run)."""
        ...

    async def save(self, run: Run, *, unless_cancel_requested: bool = False, hold: bool = False) -> None:
        """Store the run's state, with the unit of work's writes, if `run.lease` is still its stored lease; raises
        LeaseLost otherwise (another process claimed the run since it was read). With `unless_cancel_requested`,
        raises CancelRequested instead if a cancel of the run was requested meanwhile. Either is raised here or
        when the unit of work commits, and then nothing of the unit of work is written. Whether a cancel was
        requested is stored only by `request_cancel`, so a run that executes never overwrites a cancel asked for
        meanwhile. With `hold`, this process becomes the run's holder (it goes on with it, as a claim would make
        it: a run its client's answers or tool results resume); other saves (a cancel, a live question's answer)
        leave the holder as it is."""
        ...

    async def request_cancel(self, org_id: OrgId, run_id: RunId) -> None: ...


class RunEventRepository(Protocol):
    async def add(self, event: RunEvent, org_id: OrgId) -> None:
        """Stored with the unit of work, as MessageRepository.add."""
        ...

    async def list(self, org_id: OrgId, run_id: RunId, *, after_seq: int = 0) -> Sequence[RunEvent]: ...
    async def last_seq(self, run_id: RunId) -> int: ...


class RunJobRepository(Protocol):
    """The job queue that workers take runs from, where runs execute so (worker mode)."""

    async def add(self, org_id: OrgId, run_id: RunId) -> bool:
        """Queue the run's job with the unit of work's writes: it is queued if and only if they are committed.
        False where runs are not taken from such a queue: the caller hands the run to its executor after the
        commit."""
        ...


class PromptTemplateRepository(Protocol):
    async def add(self, template: PromptTemplate) -> None:
        """Raises SlugTaken when the organization has a template of that name."""
        ...

    async def get(self, org_id: OrgId, name: str) -> PromptTemplate | None: ...
    async def list(self, org_id: OrgId) -> Sequence[PromptTemplate]: ...
    async def save(self, template: PromptTemplate, previous_name: str) -> None: ...
    async def delete(self, org_id: OrgId, name: str) -> None: ...


class ArgumentValueRepository(Protocol):
    """Values an organization gave a template's arguments, for completion."""

    async def remember(
        self, org_id: OrgId, template: str, argument: str, values: Sequence[str], at: datetime
    ) -> None: ...
    async def suggest(self, org_id: OrgId, template: str, argument: str, prefix: str, limit: int) -> Sequence[str]: ...


class AuditEventRepository(Protocol):
    """Append only: events are never changed or removed."""

    async def add(self, event: AuditEvent) -> None: ...
    async def list(
        self,
        org_id: OrgId,
        *,
        limit: int,
        after: int | None,
        action: AuditAction | None = None,
        object_type: str | None = None,
        object_id: str | None = None,
    ) -> Sequence[AuditEvent]:
        """Oldest first, after the event numbered `after`."""
        ...


class UsageGrouping(StrEnum):
    """How usage is broken down: one line per day (UTC), per agent or per model."""

    DAY = "day"
    AGENT = "agent"
    MODEL = "model"


@dataclass(frozen=True, kw_only=True)
class UsageLine:
    """What the model calls of one day, agent or model (or of all, for the totals) used."""

    key: str
    """The day (YYYY-MM-DD), the agent's id or the model's name; empty for the totals."""
    usage: Usage
    model_calls: int
    tool_calls: int
    runs: int


class UsageRepository(Protocol):
    """The usage ledger: a line per model call, written with the run's step (see RunRepository.save)."""

    async def totals(
        self, org_id: OrgId, *, first_day: date, last_day: date, group_by: UsageGrouping | None
    ) -> Sequence[UsageLine]:
        """The days first_day to last_day (UTC, both included), in one line per group in key order, or one line
        for all of them when group_by is None."""
        ...


class UnitOfWork(Protocol):
    """One short transaction. Nothing is written unless `commit` is called before leaving.

    A unit of work can be entered again after it was left, which opens a new transaction:
    use cases keep slow calls (model, MCP) between two of them, never inside one.
    """

    organizations: OrganizationRepository
    api_keys: ApiKeyRepository
    agents: AgentRepository
    threads: ThreadRepository
    messages: MessageRepository
    integrations: McpIntegrationRepository
    sources: SourceRepository
    passages: PassageRepository
    passage_vectors: PassageVectorRepository
    thread_summaries: ThreadSummaryRepository
    runs: RunRepository
    run_events: RunEventRepository
    run_jobs: RunJobRepository
    prompt_templates: PromptTemplateRepository
    argument_values: ArgumentValueRepository
    audit_events: AuditEventRepository
    usage: UsageRepository

    def read_only(self) -> "UnitOfWork":
        """A unit of work for reading only: it never waits for writers, and cannot commit."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    async def commit(self) -> None: ...
