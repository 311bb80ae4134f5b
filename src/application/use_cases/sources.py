"""Sources of threads and agents: uploaded (a file or a URL), listed, read, deleted, re-indexed, and
searched passage by passage."""

from dataclasses import dataclass

from application.caller import Caller
from application.errors import (
    AgentNotFound,
    DuplicateSource,
    InvalidReference,
    SourceNotFound,
    SourceTooLarge,
    ThreadNotFound,
    UnreadableSource,
)
from application.pagination import Page, PageRequest, decode_id_cursor, decode_position_cursor, page_of
from application.ports.documents import DocumentReader, FileFetcher
from application.ports.persistence import EmbeddingState, SearchScope, SourceSummary, UnitOfWork
from application.ports.system import Clock, IdGenerator
from application.retrieval import PassageSearch, Retrieved, SourceIndexing, indexing_of
from domain.errors import InvalidValue
from domain.ids import AgentId, OrgId, SourceId, ThreadId
from domain.sources import (
    SOURCE_NAME_MAX,
    CreatedBy,
    Passage,
    Source,
    SourceKind,
    SourceOrigin,
    content_hash,
    passages_of,
)

SEARCH_LIMIT_MAX = 50


class ListSources:
    """The sources of a thread or of an agent, without their content."""

    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(
        self,
        caller: Caller,
        page: PageRequest,
        *,
        thread_id: ThreadId | None = None,
        agent_id: AgentId | None = None,
    ) -> Page[SourceSummary]:
        after = decode_id_cursor(page.cursor)
        async with self._uow.read_only() as uow:
            await _require_owner(uow, caller.org_id, thread_id, agent_id)
            rows = await uow.sources.list(
                caller.org_id,
                thread_id=thread_id,
                agent_id=agent_id,
                limit=page.limit + 1,
                after=SourceId(after) if after else None,
            )
        return page_of(rows, page.limit, key=lambda s: str(s.id))


class GetSource:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, source_id: SourceId) -> Source:
        async with self._uow.read_only() as uow:
            source = await uow.sources.get(caller.org_id, source_id)
        if source is None:
            raise SourceNotFound(f"source {source_id} not found")
        return source


@dataclass(frozen=True, kw_only=True)
class ShownSource:
    source: Source
    indexing: SourceIndexing


class ShowSource:
    """A source with how far it is indexed (its passages, and how many are embedded when embeddings are on)."""

    def __init__(self, uow: UnitOfWork, embeddings_model: str | None) -> None:
        self._uow, self._model = uow, embeddings_model

    async def execute(self, caller: Caller, source_id: SourceId) -> ShownSource:
        async with self._uow.read_only() as uow:
            source = await uow.sources.get(caller.org_id, source_id)
            if source is None:
                raise SourceNotFound(f"source {source_id} not found")
            state = await uow.passage_vectors.state(caller.org_id, source_id, self._model)
        return ShownSource(source=source, indexing=indexing_of(state, embeddings_enabled=self._model is not None))


async def _require_owner(uow: UnitOfWork, org_id: OrgId, thread_id: ThreadId | None, agent_id: AgentId | None) -> None:
    if thread_id is not None and await uow.threads.get(org_id, thread_id) is None:
        raise ThreadNotFound(f"thread {thread_id} not found")
    if agent_id is not None and await uow.agents.get(org_id, agent_id) is None:
        raise AgentNotFound(f"agent {agent_id} not found")


@dataclass(frozen=True, kw_only=True)
class UploadSourceCommand:
    """A file (its bytes, as uploaded) or a URL to fetch it from, for one thread or one agent."""

    thread_id: ThreadId | None = None
    agent_id: AgentId | None = None
    name: str | None = None
    mime_type: str | None = None
    content: bytes | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        if (self.thread_id is None) == (self.agent_id is None):
            raise InvalidValue("a source is uploaded to exactly one thread or one agent")
        if (self.content is None) == (self.url is None):
            raise InvalidValue("upload a file or give a url, not both")


@dataclass(frozen=True, kw_only=True)
class IndexedSource:
    source: Source
    passages: int
    """How many passages it was split into"""
    indexing: SourceIndexing


def _indexed(source: Source, passages: int, embeddings_model: str | None) -> IndexedSource:
    state = EmbeddingState(passages=passages, embedded=0, failed=0)
    indexing = indexing_of(state, embeddings_enabled=embeddings_model is not None)
    return IndexedSource(source=source, passages=passages, indexing=indexing)


class UploadSource:
    """Reads a file (or fetches it through the outbound guard), keeps it as a text or table source, and
    indexes its passages. The same content twice for one thread or agent is refused."""

    def __init__(
        self,
        uow: UnitOfWork,
        clock: Clock,
        ids: IdGenerator,
        reader: DocumentReader,
        fetcher: FileFetcher,
        max_source_bytes: int,
        embeddings_model: str | None = None,
    ) -> None:
        self._uow, self._clock, self._ids = uow, clock, ids
        self._reader, self._fetcher, self._max_bytes = reader, fetcher, max_source_bytes
        self._embeddings_model = embeddings_model

    @property
    def max_bytes(self) -> int:
        """The largest file a source may be."""
        return self._max_bytes

    async def execute(self, caller: Caller, command: UploadSourceCommand) -> IndexedSource:
        async with self._uow.read_only() as uow:
            await _require_owner(uow, caller.org_id, command.thread_id, command.agent_id)
        name, mime_type, content, origin = await self._file(command)
        if len(content) > self._max_bytes:
            raise SourceTooLarge(f"the file is {len(content)} bytes; sources are limited to {self._max_bytes} bytes")
        if not content:
            raise UnreadableSource("the file is empty")
        digest = content_hash(content)
        async with self._uow.read_only() as uow:
            await self._refuse_duplicate(uow, caller.org_id, digest, command)
        document = await self._reader.read(name, mime_type, content)
        source = Source(
            id=SourceId(self._ids.new()),
            org_id=caller.org_id,
            thread_id=command.thread_id,
            agent_id=command.agent_id,
            kind=SourceKind.DATA if document.table is not None else SourceKind.TEXT,
            name=name,
            origin=origin,
            mime_type=document.mime_type,
            size=len(content),
            created_by=CreatedBy.USER,
            created_at=self._clock.now(),
            text=document.text,
            data=document.table,
            content_hash=digest,
        )
        passages = passages_of(source)
        async with self._uow as uow:
            try:  # the thread or agent may have gone meanwhile
                await _require_owner(uow, caller.org_id, command.thread_id, command.agent_id)
            except (ThreadNotFound, AgentNotFound) as gone:
                raise InvalidReference(gone.detail) from None
            await self._refuse_duplicate(uow, caller.org_id, digest, command)
            await uow.sources.add(source)
            await uow.passages.replace(source, passages)
            await uow.commit()
        return _indexed(source, len(passages), self._embeddings_model)

    async def _file(self, command: UploadSourceCommand) -> tuple[str, str | None, bytes, SourceOrigin]:
        if command.url is not None:
            fetched = await self._fetcher.fetch(command.url, max_bytes=self._max_bytes)
            name = command.name or fetched.name
            return _name(name), fetched.mime_type, fetched.content, SourceOrigin(type="web", uri=fetched.url)
        assert command.content is not None
        return _name(command.name or "upload"), command.mime_type, command.content, SourceOrigin(type="upload")

    @staticmethod
    async def _refuse_duplicate(uow: UnitOfWork, org_id: OrgId, digest: str, command: UploadSourceCommand) -> None:
        existing = await uow.sources.find_by_hash(
            org_id, digest, thread_id=command.thread_id, agent_id=command.agent_id
        )
        if existing is not None:
            raise DuplicateSource(f"this content was already uploaded as source {existing.id} ({existing.name!r})")


def _name(name: str) -> str:
    cleaned = name.replace("\\", "/").rsplit("/", 1)[-1].strip() or "upload"
    return cleaned[:SOURCE_NAME_MAX]


class DeleteSource:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, source_id: SourceId) -> None:
        async with self._uow as uow:
            if not await uow.sources.delete(caller.org_id, source_id):
                raise SourceNotFound(f"source {source_id} not found")
            await uow.commit()


class ReindexSource:
    """Splits a source into passages again (after the way sources are split or the organization's search
    language changed): its passages are replaced at once, searches see the old ones or the new ones. Their
    embeddings are made again in the background."""

    def __init__(self, uow: UnitOfWork, embeddings_model: str | None = None) -> None:
        self._uow, self._embeddings_model = uow, embeddings_model

    async def execute(self, caller: Caller, source_id: SourceId) -> IndexedSource:
        async with self._uow as uow:
            source = await uow.sources.get(caller.org_id, source_id)
            if source is None:
                raise SourceNotFound(f"source {source_id} not found")
            passages = passages_of(source)
            await uow.passages.replace(source, passages)
            await uow.commit()
        return _indexed(source, len(passages), self._embeddings_model)


class IndexStoredSources:
    """Indexes the sources stored before sources were split into passages (they were invisible to searches
    and `source_query` until then), a batch per transaction; run by `threadline migrate`. Answers how many."""

    BATCH = 100

    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self) -> int:
        indexed, after = 0, None
        while True:
            async with self._uow as uow:
                batch = await uow.passages.unindexed(limit=self.BATCH, after=after)
                for org_id, source_id in batch:
                    source = await uow.sources.get(org_id, source_id)
                    if source is not None:
                        await uow.passages.replace(source, passages_of(source))
                        indexed += 1
                await uow.commit()
            if len(batch) < self.BATCH:
                return indexed
            after = batch[-1][1]


class ListPassages:
    """A source's passages in order, with their locations."""

    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    async def execute(self, caller: Caller, source_id: SourceId, page: PageRequest) -> Page[Passage]:
        after = decode_position_cursor(page.cursor)
        async with self._uow.read_only() as uow:
            if await uow.sources.get(caller.org_id, source_id) is None:
                raise SourceNotFound(f"source {source_id} not found")
            rows = await uow.passages.list(caller.org_id, source_id, limit=page.limit + 1, after=after)
        return page_of(rows, page.limit, key=lambda p: str(p.position))


@dataclass(frozen=True, kw_only=True)
class SearchSourcesQuery:
    thread_id: ThreadId
    text: str
    limit: int = 10
    source_id: SourceId | None = None


class SearchSources:
    """The passages of a thread's sources (and its agent's) that best answer a query, best first: in full text,
    or hybrid (full text and meaning) when embeddings are on."""

    def __init__(self, uow: UnitOfWork, search: PassageSearch) -> None:
        self._uow, self._search = uow, search

    async def execute(self, caller: Caller, query: SearchSourcesQuery) -> Retrieved:
        if not query.text.strip():
            raise InvalidValue("the query is empty")
        async with self._uow.read_only() as uow:
            thread = await uow.threads.get(caller.org_id, query.thread_id)
        if thread is None:
            raise ThreadNotFound(f"thread {query.thread_id} not found")
        scope = SearchScope(thread_id=thread.id, agent_id=thread.agent_id, source_id=query.source_id)
        limit = min(max(query.limit, 1), SEARCH_LIMIT_MAX)
        return await self._search.search(caller.org_id, scope, query.text, limit=limit)
