"""An in-memory unit of work with every repository of the persistence port.

Each `async with` opens a transaction of its own: its writes are staged and reach the store only on
`commit()`, so a use case that forgets to commit (or fails halfway) changes nothing, as with a database.
Entities are copied in and out, so changing a loaded entity without saving it changes nothing either.
"""

import asyncio
import copy
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from types import TracebackType
from typing import Any, Generic, TypeVar

from application.errors import CancelRequested, IdempotencyConflict, LeaseLost, SlugTaken, StorageUnavailable
from application.ports.persistence import (
    AgentRepository,
    ApiKeyRepository,
    ArgumentValueRepository,
    AuditEventRepository,
    ClaimedRun,
    ClaimedToExecute,
    EmbeddingState,
    HistorySummary,
    McpIntegrationRepository,
    MessageRepository,
    OrganizationRepository,
    PassageHit,
    PassageRepository,
    PassageToEmbed,
    PassageVectorRepository,
    PromptTemplateRepository,
    RunEventRepository,
    RunJobRepository,
    RunRepository,
    SearchScope,
    SourceRepository,
    SourceSummary,
    ThreadRepository,
    ThreadSummaryRepository,
    ThreadToRun,
    UnfinishedRun,
    UsageGrouping,
    UsageLine,
    UsageRepository,
)
from domain.agents import Agent
from domain.api_keys import ApiKey
from domain.audit import AuditAction, AuditEvent
from domain.ids import AgentId, ApiKeyId, IntegrationId, MessageId, OrgId, RunId, SourceId, ThreadId
from domain.integrations import McpIntegration, SealedSecret
from domain.messages import Message
from domain.organizations import Organization
from domain.prompt_templates import PromptTemplate
from domain.run_events import RunEvent
from domain.runs import Run, RunStatus, RunStep
from domain.sources import Passage, Source
from domain.threads import Thread
from domain.usage import Usage

K = TypeVar("K")
V = TypeVar("V")


@dataclass
class Store:
    """What the fake database holds: one dictionary per table, keyed like its primary key."""

    organizations: dict[OrgId, Organization] = field(default_factory=dict)
    api_keys: dict[ApiKeyId, ApiKey] = field(default_factory=dict)
    agents: dict[AgentId, Agent] = field(default_factory=dict)
    threads: dict[ThreadId, Thread] = field(default_factory=dict)
    messages: dict[MessageId, Message] = field(default_factory=dict)
    integrations: dict[IntegrationId, McpIntegration] = field(default_factory=dict)
    sources: dict[SourceId, Source] = field(default_factory=dict)
    passages: dict[tuple[SourceId, int], tuple[Source, Passage]] = field(default_factory=dict)
    thread_summaries: dict[ThreadId, tuple[OrgId, HistorySummary]] = field(default_factory=dict)
    runs: dict[RunId, Run] = field(default_factory=dict)
    run_events: dict[tuple[RunId, int], tuple[OrgId, RunEvent]] = field(default_factory=dict)
    templates: dict[tuple[OrgId, str], PromptTemplate] = field(default_factory=dict)
    argument_values: dict[tuple[OrgId, str, str, str], datetime] = field(default_factory=dict)
    audit_events: dict[int, AuditEvent] = field(default_factory=dict)
    run_jobs: dict[RunId, OrgId] | None = None
    """The runs' jobs queued with the units' writes, where runs execute from a job queue (worker mode); None where
    they do not (the caller submits them)."""
    silent_holders: set[RunId] = field(default_factory=set)
    """The runs whose holder (the process that created or last took them) is silent (worker mode); claiming one
    takes it from this set."""
    commits: int = 0
    failing_commits: int = 0
    """How many of the next commits fail with StorageUnavailable (the database went away), writing nothing."""
    commit_waits: asyncio.Event | None = None
    """When given, the next commit waits for it first (a write still in flight)."""


class Table(Generic[K, V]):
    """One table as a transaction sees it: the store's rows with this transaction's staged writes on top."""

    def __init__(self, rows: dict[K, V]) -> None:
        self._rows = rows
        self._staged: dict[K, V | None] = {}
        """None: deleted."""

    def get(self, key: K) -> V | None:
        return copy.deepcopy(self._staged[key] if key in self._staged else self._rows.get(key))

    def put(self, key: K, value: V) -> None:
        self._staged[key] = copy.deepcopy(value)

    def delete(self, key: K) -> None:
        self._staged[key] = None

    def items(self) -> list[tuple[K, V]]:
        merged: dict[K, V | None] = {**self._rows, **self._staged}
        return [(k, copy.deepcopy(v)) for k, v in merged.items() if v is not None]

    def values(self) -> list[V]:
        return [v for _, v in self.items()]

    def where(self, test: Callable[[V], bool]) -> list[V]:
        return [v for v in self.values() if test(v)]

    def commit(self) -> None:
        for key, value in self._staged.items():
            if value is None:
                self._rows.pop(key, None)
            else:
                self._rows[key] = value
        self._staged.clear()


def _page(items: Iterable[V], key: Callable[[V], Any], after: Any, limit: int) -> list[V]:
    ordered = sorted(items, key=key)
    return [i for i in ordered if after is None or key(i) > after][:limit]


class FakeOrganizations:
    def __init__(self, table: Table[OrgId, Organization]) -> None:
        self.table = table

    async def add(self, org: Organization) -> None:
        if self.table.where(lambda o: o.slug == org.slug):
            raise SlugTaken(f"an organization with slug {org.slug!r} already exists")
        self.table.put(org.id, org)

    async def get(self, org_id: OrgId) -> Organization | None:
        return self.table.get(org_id)

    async def get_by_slug(self, slug: str) -> Organization | None:
        return next(iter(self.table.where(lambda o: o.slug == slug)), None)

    async def save_limits(self, org: Organization) -> None:
        self.table.put(org.id, org)

    async def save_search_language(self, org: Organization) -> None:
        self.table.put(org.id, org)


class FakeApiKeys:
    def __init__(self, table: Table[ApiKeyId, ApiKey]) -> None:
        self.table = table

    async def add(self, key: ApiKey) -> None:
        self.table.put(key.id, key)

    async def get(self, org_id: OrgId, key_id: ApiKeyId) -> ApiKey | None:
        key = self.table.get(key_id)
        return key if key is not None and key.org_id == org_id else None

    async def find_by_prefix(self, prefix: str) -> ApiKey | None:
        return next(iter(self.table.where(lambda k: k.prefix == prefix)), None)

    async def list(self, org_id: OrgId, *, limit: int, after: ApiKeyId | None) -> Sequence[ApiKey]:
        return _page(self.table.where(lambda k: k.org_id == org_id), lambda k: k.id, after, limit)

    async def save(self, key: ApiKey) -> None:
        self.table.put(key.id, key)

    async def touch(self, key: ApiKey) -> None:
        stored = self.table.get(key.id)
        if stored is not None:
            self.table.put(key.id, replace(stored, last_used_at=key.last_used_at))


class FakeAgents:
    def __init__(self, table: Table[AgentId, Agent]) -> None:
        self.table = table

    async def add(self, agent: Agent) -> None:
        self._check_slug(agent)
        self.table.put(agent.id, agent)

    def _check_slug(self, agent: Agent) -> None:
        if self.table.where(lambda a: a.org_id == agent.org_id and a.slug == agent.slug and a.id != agent.id):
            raise SlugTaken(f"an agent with slug {agent.slug!r} already exists in this organization")

    async def get(self, org_id: OrgId, agent_id: AgentId) -> Agent | None:
        agent = self.table.get(agent_id)
        return agent if agent is not None and agent.org_id == org_id else None

    async def get_by_slug(self, org_id: OrgId, slug: str) -> Agent | None:
        return next(iter(self.table.where(lambda a: a.org_id == org_id and a.slug == slug)), None)

    async def published(self, org_id: OrgId) -> Sequence[Agent]:
        return sorted(self.table.where(lambda a: a.org_id == org_id and a.publish_as_mcp), key=lambda a: a.slug)

    async def list(self, org_id: OrgId, *, limit: int, after: AgentId | None) -> Sequence[Agent]:
        return _page(self.table.where(lambda a: a.org_id == org_id), lambda a: a.id, after, limit)

    async def existing_ids(self, org_id: OrgId, ids: Sequence[AgentId]) -> set[AgentId]:
        return {a.id for a in self.table.where(lambda a: a.org_id == org_id and a.id in ids)}

    async def referencing_sub_agent(self, org_id: OrgId, agent_id: AgentId) -> Sequence[Agent]:
        return self.table.where(lambda a: a.org_id == org_id and agent_id in a.sub_agent_ids)

    async def using_integration(self, org_id: OrgId, integration_id: IntegrationId) -> Sequence[Agent]:
        return self.table.where(lambda a: a.org_id == org_id and integration_id in a.mcp_integration_ids)

    async def save(self, agent: Agent) -> None:
        self._check_slug(agent)
        self.table.put(agent.id, agent)

    async def delete(self, org_id: OrgId, agent_id: AgentId) -> None:
        if await self.get(org_id, agent_id) is not None:
            self.table.delete(agent_id)


def _unfinished_in(runs: "Table[RunId, Run]", org_id: OrgId, thread_id: ThreadId) -> Run | None:
    """The thread's run that has not ended (one at most, as the database keeps it)."""
    found = runs.where(lambda r: r.org_id == org_id and r.thread_id == thread_id and not r.status.is_terminal)
    return next(iter(found), None)


class FakeThreads:
    def __init__(
        self,
        table: Table[ThreadId, Thread],
        messages: Table[MessageId, Message],
        agents: Table[AgentId, Agent],
        runs: Table[RunId, Run],
    ) -> None:
        self.table, self._messages, self._agents, self._runs = table, messages, agents, runs

    async def add(self, thread: Thread) -> None:
        self.table.put(thread.id, thread)

    async def get(self, org_id: OrgId, thread_id: ThreadId, *, for_update: bool = False) -> Thread | None:
        thread = self.table.get(thread_id)
        return thread if thread is not None and thread.org_id == org_id else None

    async def get_to_run(self, org_id: OrgId, thread_id: ThreadId, agent_id: AgentId | None) -> ThreadToRun | None:
        thread = await self.get(org_id, thread_id, for_update=True)
        if thread is None:
            return None
        wanted = agent_id or thread.agent_id
        agent = self._agents.get(wanted) if wanted is not None else None
        unfinished = _unfinished_in(self._runs, org_id, thread_id)
        return ThreadToRun(
            thread=thread,
            agent=agent if agent is not None and agent.org_id == org_id else None,
            unfinished=UnfinishedRun(id=unfinished.id, status=unfinished.status) if unfinished is not None else None,
        )

    async def list(
        self, org_id: OrgId, *, limit: int, after: ThreadId | None, agent_id: AgentId | None = None
    ) -> Sequence[Thread]:
        found = self.table.where(lambda t: t.org_id == org_id and (agent_id is None or t.agent_id == agent_id))
        return _page(found, lambda t: t.id, after, limit)

    async def save(self, thread: Thread) -> None:
        self.table.put(thread.id, thread)

    async def counted(self, org_id: OrgId, thread_id: ThreadId, message_count: int, now: datetime) -> None:
        thread = await self.get(org_id, thread_id)
        if thread is not None:
            self.table.put(thread_id, replace(thread, message_count=message_count, updated_at=now))

    async def delete(self, org_id: OrgId, thread_id: ThreadId) -> None:
        if await self.get(org_id, thread_id) is None:
            return
        self.table.delete(thread_id)
        for message in self._messages.where(lambda m: m.thread_id == thread_id):
            self._messages.delete(message.id)


class FakeMessages:
    def __init__(self, table: Table[MessageId, Message]) -> None:
        self.table = table

    async def add(self, message: Message) -> None:
        self.table.put(message.id, message)

    def _of(self, org_id: OrgId, thread_id: ThreadId) -> list[Message]:
        found = self.table.where(lambda m: m.org_id == org_id and m.thread_id == thread_id)
        return sorted(found, key=lambda m: m.position)

    async def last(self, org_id: OrgId, thread_id: ThreadId) -> Message | None:
        messages = self._of(org_id, thread_id)
        return messages[-1] if messages else None

    async def list(
        self, org_id: OrgId, thread_id: ThreadId, *, limit: int, after_position: int | None
    ) -> Sequence[Message]:
        return [m for m in self._of(org_id, thread_id) if after_position is None or m.position > after_position][:limit]


class FakeIntegrations:
    def __init__(self, table: Table[IntegrationId, McpIntegration]) -> None:
        self.table = table

    async def add(self, integration: McpIntegration) -> None:
        self._check_slug(integration)
        self.table.put(integration.id, integration)

    def _check_slug(self, new: McpIntegration) -> None:
        if self.table.where(lambda i: i.org_id == new.org_id and i.slug == new.slug and i.id != new.id):
            raise SlugTaken(f"an integration with slug {new.slug!r} already exists in this organization")

    async def get(self, org_id: OrgId, integration_id: IntegrationId) -> McpIntegration | None:
        found = self.table.get(integration_id)
        return found if found is not None and found.org_id == org_id else None

    async def list(self, org_id: OrgId, *, limit: int, after: IntegrationId | None) -> Sequence[McpIntegration]:
        return _page(self.table.where(lambda i: i.org_id == org_id), lambda i: i.id, after, limit)

    async def get_many(self, org_id: OrgId, ids: Sequence[IntegrationId]) -> Sequence[McpIntegration]:
        return sorted(self.table.where(lambda i: i.org_id == org_id and i.id in ids), key=lambda i: i.id)

    async def save(self, integration: McpIntegration) -> None:
        self._check_slug(integration)
        self.table.put(integration.id, integration)

    async def delete(self, org_id: OrgId, integration_id: IntegrationId) -> None:
        if await self.get(org_id, integration_id) is not None:
            self.table.delete(integration_id)

    async def all_sealed_credentials(self) -> Sequence[tuple[OrgId, IntegrationId, str]]:
        return [(i.org_id, i.id, i.credentials.ciphertext) for i in self.table.values() if i.credentials is not None]

    async def replace_ciphertext(self, org_id: OrgId, integration_id: IntegrationId, ciphertext: str) -> None:
        found = await self.get(org_id, integration_id)
        if found is not None and found.credentials is not None:
            found.credentials = SealedSecret(ciphertext=ciphertext, last4=found.credentials.last4)
            self.table.put(integration_id, found)


class FakeSources:
    def __init__(self, table: Table[SourceId, Source]) -> None:
        self.table = table

    async def add(self, source: Source) -> None:
        self.table.put(source.id, source)

    async def get(self, org_id: OrgId, source_id: SourceId) -> Source | None:
        found = self.table.get(source_id)
        return found if found is not None and found.org_id == org_id else None

    async def list(
        self,
        org_id: OrgId,
        *,
        thread_id: ThreadId | None = None,
        agent_id: AgentId | None = None,
        limit: int,
        after: SourceId | None,
    ) -> Sequence[SourceSummary]:
        found = self.table.where(
            lambda s: (
                s.org_id == org_id
                and (thread_id is None or s.thread_id == thread_id)
                and (agent_id is None or s.agent_id == agent_id)
            )
        )
        return [_summary(s) for s in _page(found, lambda s: s.id, after, limit)]

    async def find_by_hash(
        self, org_id: OrgId, content_hash: str, *, thread_id: ThreadId | None, agent_id: AgentId | None
    ) -> SourceSummary | None:
        found = self.table.where(
            lambda s: (
                s.org_id == org_id
                and s.content_hash == content_hash
                and (s.thread_id == thread_id if thread_id is not None else s.agent_id == agent_id)
            )
        )
        return _summary(found[0]) if found else None

    async def delete(self, org_id: OrgId, source_id: SourceId) -> bool:
        if await self.get(org_id, source_id) is None:
            return False
        self.table.delete(source_id)
        return True


class FakeThreadSummaries:
    def __init__(self, table: Table[ThreadId, tuple[OrgId, HistorySummary]]) -> None:
        self.table = table

    async def get(self, org_id: OrgId, thread_id: ThreadId) -> HistorySummary | None:
        found = self.table.get(thread_id)
        return found[1] if found is not None and found[0] == org_id else None

    async def save(self, org_id: OrgId, thread_id: ThreadId, summary: HistorySummary, *, now: datetime) -> None:
        self.table.put(thread_id, (org_id, summary))


class FakePassageVectors:
    """No passage is ever embedded: unit tests search in full text (the databases' tests embed)."""

    def __init__(self, passages: Table[tuple[SourceId, int], tuple[Source, Passage]]) -> None:
        self.passages = passages

    async def newest_passage(self) -> int:
        return len(self.passages.values())

    async def take(self, model: str, *, limit: int, now: datetime, hold_until: datetime) -> Sequence[PassageToEmbed]:
        return []

    async def store(self, model: str, vectors: Sequence[tuple[int, bytes]], *, now: datetime) -> None:
        raise AssertionError("nothing was taken to be embedded")

    async def failed(self, model: str, passage_ids: Sequence[int], error: str, *, retry_at: datetime) -> None:
        raise AssertionError("nothing was taken to be embedded")

    async def nearest(
        self, org_id: OrgId, scope: SearchScope, model: str, vector: bytes, *, limit: int
    ) -> Sequence[PassageHit]:
        return []

    async def state(self, org_id: OrgId, source_id: SourceId, model: str | None) -> EmbeddingState:
        count = sum(1 for s, _ in self.passages.values() if s.org_id == org_id and s.id == source_id)
        return EmbeddingState(passages=count, embedded=0, failed=0)


class FakePassages:
    """Passages searched by the words they share with the query (the databases rank by bm25 or ts_rank_cd)."""

    def __init__(self, table: Table[tuple[SourceId, int], tuple[Source, Passage]]) -> None:
        self.table = table
        self.languages_changed: list[OrgId] = []

    async def replace(self, source: Source, passages: Sequence[Passage]) -> None:
        for key, _ in self.table.items():
            if key[0] == source.id:
                self.table.delete(key)
        for passage in passages:
            self.table.put((source.id, passage.position), (source, passage))

    async def unindexed(self, *, limit: int, after: SourceId | None) -> Sequence[tuple[OrgId, SourceId]]:
        return []  # the fakes start empty: nothing was stored before sources were indexed

    async def list(self, org_id: OrgId, source_id: SourceId, *, limit: int, after: int | None) -> Sequence[Passage]:
        found = [p for s, p in self.table.values() if s.org_id == org_id and s.id == source_id]
        return _page(found, lambda p: p.position, after, limit)

    async def language_changed(self, org_id: OrgId) -> None:
        self.languages_changed.append(org_id)

    async def search(self, org_id: OrgId, scope: SearchScope, query: str, *, limit: int) -> Sequence[PassageHit]:
        words = set(re.findall(r"\w+", query.lower()))
        hits = []
        for source, passage in self.table.values():
            owned = (scope.thread_id is not None and source.thread_id == scope.thread_id) or (
                scope.agent_id is not None and source.agent_id == scope.agent_id
            )
            if source.org_id != org_id or not owned or scope.source_id not in (None, source.id):
                continue
            score = len(words & set(re.findall(r"\w+", f"{passage.heading or ''} {passage.text}".lower())))
            if score:
                hit = PassageHit(
                    source_id=source.id, source_name=source.name, passage=passage, snippet=passage.text, score=score
                )
                hits.append(hit)
        return sorted(hits, key=lambda h: -h.score)[:limit]


def _summary(source: Source) -> SourceSummary:
    return SourceSummary(
        id=source.id,
        kind=source.kind,
        name=source.name,
        origin=source.origin,
        mime_type=source.mime_type,
        size=source.size,
        created_by=source.created_by,
        created_at=source.created_at,
        thread_id=source.thread_id,
        agent_id=source.agent_id,
    )


class FakeRuns:
    def __init__(
        self,
        table: Table[RunId, Run],
        events: "FakeRunEvents",
        agents: Table[AgentId, Agent],
        jobs: Table[RunId, OrgId] | None = None,
        silent_holders: set[RunId] | None = None,
    ) -> None:
        self._jobs, self._silent = jobs, silent_holders if silent_holders is not None else set()
        self.table, self._events, self._agents = table, events, agents

    async def add(self, run: Run) -> None:
        key = run.idempotency_key
        if key is not None and self.table.where(lambda r: r.org_id == run.org_id and r.idempotency_key == key):
            raise IdempotencyConflict("a run with this idempotency key exists")
        self.table.put(run.id, run)

    async def get(self, org_id: OrgId, run_id: RunId, *, for_update: bool = False) -> Run | None:
        found = self.table.get(run_id)
        return found if found is not None and found.org_id == org_id else None

    async def find_by_idempotency_key(self, org_id: OrgId, key: str) -> Run | None:
        return next(iter(self.table.where(lambda r: r.org_id == org_id and r.idempotency_key == key)), None)

    async def list(
        self,
        org_id: OrgId,
        *,
        limit: int,
        after: RunId | None,
        thread_id: ThreadId | None = None,
        agent_id: AgentId | None = None,
        status: RunStatus | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> Sequence[Run]:
        found = self.table.where(
            lambda r: (
                r.org_id == org_id
                and (thread_id is None or r.thread_id == thread_id)
                and (agent_id is None or r.agent_id == agent_id)
                and (status is None or r.status is status)
                and (created_after is None or r.created_at >= created_after)
                and (created_before is None or r.created_at < created_before)
            )
        )
        return _page(found, lambda r: r.id, after, limit)

    async def active_in_thread(self, org_id: OrgId, thread_id: ThreadId) -> Run | None:
        return _unfinished_in(self.table, org_id, thread_id)

    async def unfinished(self, limit: int, after: RunId | None = None) -> Sequence[Run]:
        found = self.table.where(
            lambda r: (
                (r.status in (RunStatus.QUEUED, RunStatus.IN_PROGRESS) or r.asks_live)
                and (after is None or r.id > after)
            )
        )
        return sorted(found, key=lambda r: r.id)[:limit]

    async def stranded(self, silent_seconds: float, limit: int, after: RunId | None = None) -> Sequence[Run]:
        if self._jobs is None:
            return []
        jobs = self._jobs
        found = self.table.where(
            lambda r: (
                r.status in (RunStatus.QUEUED, RunStatus.IN_PROGRESS)
                and r.id in self._silent
                and jobs.get(r.id) is None
                and (after is None or r.id > after)
            )
        )
        return sorted(found, key=lambda r: r.id)[:limit]

    async def claim_stranded(self, run: Run, silent_seconds: float) -> ClaimedRun | None:
        stored = self.table.get(run.id)
        if stored is None or stored.lease != run.lease:
            return None
        if not any(r.id == run.id for r in await self.stranded(silent_seconds, len(self._silent), after=None)):
            return None
        return await self.claim(run.org_id, run.id)

    async def unfinished_children(self, org_id: OrgId, run_id: RunId) -> Sequence[RunId]:
        found = self.table.where(
            lambda r: r.org_id == org_id and r.parent_run_id == run_id and not r.status.is_terminal
        )
        return [r.id for r in found]

    async def claim(self, org_id: OrgId, run_id: RunId) -> ClaimedRun | None:
        found = await self.get(org_id, run_id)
        if found is None:
            return None
        found.lease += 1
        self.table.put(run_id, found)
        self._silent.discard(run_id)  # held by this process now
        return ClaimedRun(found, await self._events.last_seq(run_id))

    async def claim_to_execute(self, org_id: OrgId, run_id: RunId) -> ClaimedToExecute | None:
        claimed = await self.claim(org_id, run_id)
        if claimed is None:
            return None
        agent = self._agents.get(claimed.run.agent_id)
        mine = agent if agent is not None and agent.org_id == org_id else None
        return ClaimedToExecute(claimed.run, claimed.last_event_seq, mine)

    async def save(self, run: Run, *, unless_cancel_requested: bool = False, hold: bool = False) -> None:
        stored = self.table.get(run.id)
        if stored is not None and stored.lease != run.lease:
            raise LeaseLost(f"run {run.id} was taken over by another process")
        if unless_cancel_requested and stored is not None and stored.cancel_requested:
            raise CancelRequested(f"a cancel of run {run.id} was requested")
        cancel_requested = stored.cancel_requested if stored is not None else run.cancel_requested
        self.table.put(run.id, replace(run, cancel_requested=cancel_requested))
        if hold:
            self._silent.discard(run.id)  # held by this process now

    async def request_cancel(self, org_id: OrgId, run_id: RunId) -> None:
        stored = await self.get(org_id, run_id)
        if stored is not None:
            self.table.put(run_id, replace(stored, cancel_requested=True))


class FakeRunEvents:
    def __init__(self, table: Table[tuple[RunId, int], tuple[OrgId, RunEvent]]) -> None:
        self.table = table

    async def add(self, event: RunEvent, org_id: OrgId) -> None:
        if self.table.get((event.run_id, event.seq)) is not None:
            raise AssertionError(f"event {event.seq} of run {event.run_id} stored twice")
        self.table.put((event.run_id, event.seq), (org_id, event))

    async def list(self, org_id: OrgId, run_id: RunId, *, after_seq: int = 0) -> Sequence[RunEvent]:
        found = [e for o, e in self.table.values() if o == org_id and e.run_id == run_id and e.seq > after_seq]
        return sorted(found, key=lambda e: e.seq)

    async def last_seq(self, run_id: RunId) -> int:
        return max((e.seq for _, e in self.table.values() if e.run_id == run_id), default=0)


class FakePromptTemplates:
    def __init__(self, table: Table[tuple[OrgId, str], PromptTemplate]) -> None:
        self.table = table

    async def add(self, template: PromptTemplate) -> None:
        assert template.org_id is not None
        if self.table.get((template.org_id, template.name)) is not None:
            raise SlugTaken(f"a prompt template named {template.name!r} already exists")
        self.table.put((template.org_id, template.name), template)

    async def get(self, org_id: OrgId, name: str) -> PromptTemplate | None:
        return self.table.get((org_id, name))

    async def list(self, org_id: OrgId) -> Sequence[PromptTemplate]:
        return sorted(self.table.where(lambda t: t.org_id == org_id), key=lambda t: t.name)

    async def save(self, template: PromptTemplate, previous_name: str) -> None:
        assert template.org_id is not None
        if previous_name != template.name and self.table.get((template.org_id, template.name)) is not None:
            raise SlugTaken(f"a prompt template named {template.name!r} already exists")
        self.table.delete((template.org_id, previous_name))
        self.table.put((template.org_id, template.name), template)

    async def delete(self, org_id: OrgId, name: str) -> None:
        self.table.delete((org_id, name))


class FakeArgumentValues:
    def __init__(self, table: Table[tuple[OrgId, str, str, str], datetime]) -> None:
        self.table = table

    async def remember(self, org_id: OrgId, template: str, argument: str, values: Sequence[str], at: datetime) -> None:
        for value in values:
            if value:
                self.table.put((org_id, template, argument, value[:500]), at)

    async def suggest(self, org_id: OrgId, template: str, argument: str, prefix: str, limit: int) -> Sequence[str]:
        found = [
            (used, key[3])
            for key, used in self.table.items()
            if key[:3] == (org_id, template, argument) and key[3].lower().startswith(prefix.lower())
        ]
        return [value for _, value in sorted(found, reverse=True)][:limit]


class FakeAuditEvents:
    def __init__(self, table: Table[int, AuditEvent]) -> None:
        self.table = table

    async def add(self, event: AuditEvent) -> None:
        number = max((k for k, _ in self.table.items()), default=0) + 1
        self.table.put(number, replace(event, id=number))

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
        found = self.table.where(
            lambda e: (
                e.org_id == org_id
                and action in (None, e.action)
                and object_type in (None, e.object_type)
                and object_id in (None, e.object_id)
            )
        )
        return _page(found, lambda e: e.id, after, limit)


class FakeUsage:
    """Adds up the steps of the stored runs (the SQL ledger is a line per step, written with it)."""

    def __init__(self, runs: Table[RunId, Run]) -> None:
        self.runs = runs

    async def totals(
        self, org_id: OrgId, *, first_day: date, last_day: date, group_by: UsageGrouping | None
    ) -> Sequence[UsageLine]:
        lines: dict[str, list[tuple[RunId, RunStep]]] = {}
        for run in self.runs.where(lambda r: r.org_id == org_id):
            for step in run.steps:
                day = step.completed_at.astimezone(UTC).date()
                if first_day <= day <= last_day:
                    key = {
                        None: "",
                        UsageGrouping.DAY: day.isoformat(),
                        UsageGrouping.AGENT: str(run.agent_id),
                        UsageGrouping.MODEL: step.model,
                    }[group_by]
                    lines.setdefault(key, []).append((run.id, step))
        if group_by is None and not lines:
            lines[""] = []
        return [
            UsageLine(
                key=key,
                usage=sum((s.usage for _, s in steps), Usage()),
                model_calls=len(steps),
                tool_calls=sum(len(s.tool_calls) for _, s in steps),
                runs=len({r for r, _ in steps}),
            )
            for key, steps in sorted(lines.items())
        ]


class FakeRunJobs:
    """The jobs of worker mode, queued with the unit's writes; none in the process's own mode (the caller submits)."""

    def __init__(self, jobs: Table[RunId, OrgId] | None) -> None:
        self._jobs = jobs

    async def add(self, org_id: OrgId, run_id: RunId) -> bool:
        if self._jobs is None:
            return False
        self._jobs.put(run_id, org_id)
        return True


class FakeUnitOfWork:
    """The unit of work of the persistence port, over a Store (shared by every transaction)."""

    def __init__(self, store: Store | None = None, *, read_only: bool = False) -> None:
        self.store = store if store is not None else Store()
        self._read_only = read_only
        self._tables: list[Table[Any, Any]] = []
        s = self.store
        messages, threads, runs = self._table(s.messages), self._table(s.threads), self._table(s.runs)
        self.organizations: OrganizationRepository = FakeOrganizations(self._table(s.organizations))
        self.api_keys: ApiKeyRepository = FakeApiKeys(self._table(s.api_keys))
        self.agents: AgentRepository = FakeAgents(self._table(s.agents))
        self.messages: MessageRepository = FakeMessages(messages)
        self.threads: ThreadRepository = FakeThreads(threads, messages, self._table(s.agents), runs)
        self.integrations: McpIntegrationRepository = FakeIntegrations(self._table(s.integrations))
        self.sources: SourceRepository = FakeSources(self._table(s.sources))
        self.passages: PassageRepository = FakePassages(self._table(s.passages))
        self.passage_vectors: PassageVectorRepository = FakePassageVectors(self._table(s.passages))
        self.thread_summaries: ThreadSummaryRepository = FakeThreadSummaries(self._table(s.thread_summaries))
        run_events = FakeRunEvents(self._table(s.run_events))
        run_jobs = None if s.run_jobs is None else self._table(s.run_jobs)
        self.runs: RunRepository = FakeRuns(runs, run_events, self._table(s.agents), run_jobs, s.silent_holders)
        self.run_events: RunEventRepository = run_events
        self.run_jobs: RunJobRepository = FakeRunJobs(run_jobs)
        self.prompt_templates: PromptTemplateRepository = FakePromptTemplates(self._table(s.templates))
        self.argument_values: ArgumentValueRepository = FakeArgumentValues(self._table(s.argument_values))
        self.audit_events: AuditEventRepository = FakeAuditEvents(self._table(s.audit_events))
        self.usage: UsageRepository = FakeUsage(self._table(s.runs))

    def _table(self, rows: dict[K, V]) -> Table[K, V]:
        table = Table(rows)
        self._tables.append(table)
        return table

    def read_only(self) -> "FakeUnitOfWork":
        return FakeUnitOfWork(self.store, read_only=True)

    async def __aenter__(self) -> "FakeUnitOfWork":
        return FakeUnitOfWork(self.store, read_only=self._read_only)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    async def commit(self) -> None:
        if self._read_only:
            raise RuntimeError("a read-only unit of work cannot commit")
        waits, self.store.commit_waits = self.store.commit_waits, None
        if waits is not None:
            await waits.wait()
        if self.store.failing_commits > 0:
            self.store.failing_commits -= 1
            raise StorageUnavailable("the database is unavailable; try again shortly")
        for table in self._tables:
            table.commit()
        self.store.commits += 1
