"""Uploading, re-indexing and searching sources, on fakes: what is kept, what is refused, whose it is."""

import pytest

from application.caller import Caller
from application.errors import DuplicateSource, SourceNotFound, SourceTooLarge, ThreadNotFound
from application.pagination import PageRequest
from application.ports.documents import Document, FetchedFile
from application.retrieval import PassageSearch
from application.use_cases.sources import (
    ListPassages,
    ReindexSource,
    SearchSources,
    SearchSourcesQuery,
    UploadSource,
    UploadSourceCommand,
)
from domain.api_keys import Role
from domain.errors import InvalidValue
from domain.sources import SourceKind, content_hash
from domain.threads import Thread
from tests.unit.fakes.app import FakeApp


class TextReader:
    """Reads every file as Markdown text."""

    async def read(self, name: str, mime_type: str | None, content: bytes) -> Document:
        return Document(mime_type="text/markdown", text=content.decode())


class Files:
    def __init__(self) -> None:
        self.fetched: list[str] = []

    async def fetch(self, url: str, *, max_bytes: int) -> FetchedFile:
        self.fetched.append(url)
        return FetchedFile(url=url, name="faq.md", mime_type="text/markdown", content=b"# FAQ\n\nRefunds take a week.")


def upload_source(app: FakeApp, files: Files | None = None, max_bytes: int = 1000) -> UploadSource:
    return UploadSource(app.uow, app.clock, app.ids, TextReader(), files or Files(), max_source_bytes=max_bytes)


async def caller_and_thread(app: FakeApp) -> tuple[Caller, Thread]:
    org = await app.organization()
    return Caller(org_id=org.id, role=Role.MEMBER), await app.thread(await app.agent(org))


async def test_an_upload_is_kept_with_its_hash_and_indexed() -> None:
    app = FakeApp()
    caller, thread = await caller_and_thread(app)
    content = b"# Guide\n\n## Setup\n\nPlug it in.\n\n## Care\n\nDust it weekly."
    indexed = await upload_source(app).execute(
        caller, UploadSourceCommand(thread_id=thread.id, name="dir/guide.md", content=content)
    )
    assert (indexed.source.name, indexed.source.kind, indexed.passages) == ("guide.md", SourceKind.TEXT, 2)
    assert indexed.source.content_hash == content_hash(content) and indexed.source.origin.type == "upload"
    page = await ListPassages(app.uow).execute(caller, indexed.source.id, PageRequest())
    assert [(p.heading, p.text) for p in page.items] == [
        ("Guide > Setup", "Plug it in."),
        ("Guide > Care", "Dust it weekly."),
    ]


async def test_the_same_content_twice_for_one_thread_is_refused_but_not_for_another_owner() -> None:
    app = FakeApp()
    caller, thread = await caller_and_thread(app)
    upload = upload_source(app)
    first = await upload.execute(caller, UploadSourceCommand(thread_id=thread.id, name="a.md", content=b"hello"))
    with pytest.raises(DuplicateSource, match=str(first.source.id)):
        await upload.execute(caller, UploadSourceCommand(thread_id=thread.id, name="b.md", content=b"hello"))
    of_agent = await upload.execute(
        caller, UploadSourceCommand(agent_id=thread.agent_id, name="c.md", content=b"hello")
    )
    assert of_agent.source.content_hash == first.source.content_hash


async def test_a_file_over_the_limit_is_refused_and_nothing_is_kept() -> None:
    app = FakeApp()
    caller, thread = await caller_and_thread(app)
    with pytest.raises(SourceTooLarge):
        await upload_source(app, max_bytes=4).execute(
            caller, UploadSourceCommand(thread_id=thread.id, name="a.md", content=b"hello")
        )
    assert app.store.sources == {} and app.store.passages == {}


async def test_another_organizations_thread_is_not_found() -> None:
    app = FakeApp()
    caller, _ = await caller_and_thread(app)
    _, theirs = await caller_and_thread(app)
    with pytest.raises(ThreadNotFound):
        await upload_source(app).execute(caller, UploadSourceCommand(thread_id=theirs.id, name="a.md", content=b"x"))
    with pytest.raises(ThreadNotFound):
        await SearchSources(app.uow, PassageSearch(app.uow, None)).execute(
            caller, SearchSourcesQuery(thread_id=theirs.id, text="x")
        )


async def test_a_url_is_fetched_and_remembered_as_the_origin() -> None:
    app = FakeApp()
    caller, thread = await caller_and_thread(app)
    files = Files()
    indexed = await upload_source(app, files).execute(
        caller, UploadSourceCommand(agent_id=thread.agent_id, url="https://example.org/faq.md")
    )
    assert files.fetched == ["https://example.org/faq.md"]
    assert (indexed.source.origin.type, indexed.source.origin.uri, indexed.source.name) == (
        "web",
        "https://example.org/faq.md",
        "faq.md",
    )
    search = SearchSources(app.uow, PassageSearch(app.uow, None))
    [hit] = (await search.execute(caller, SearchSourcesQuery(thread_id=thread.id, text="refunds"))).hits
    assert hit.source_id == indexed.source.id and hit.passage.heading == "FAQ"


@pytest.mark.parametrize(
    "fields", [{}, {"content": b"x", "url": "https://example.org"}, {"content": b"x", "agent_id": "set"}]
)
async def test_an_upload_names_one_owner_and_one_file(fields: dict[str, object]) -> None:
    app = FakeApp()
    _, thread = await caller_and_thread(app)
    owners = {"thread_id": thread.id, **({"agent_id": thread.agent_id} if fields.pop("agent_id", None) else {})}
    with pytest.raises(InvalidValue):
        UploadSourceCommand(**owners, **fields)  # type: ignore[arg-type]


async def test_a_source_is_indexed_again_and_a_missing_one_is_not_found() -> None:
    app = FakeApp()
    caller, thread = await caller_and_thread(app)
    indexed = await upload_source(app).execute(
        caller, UploadSourceCommand(thread_id=thread.id, name="a.md", content=b"one\n\ntwo")
    )
    again = await ReindexSource(app.uow).execute(caller, indexed.source.id)
    assert again.passages == indexed.passages == 1
    with pytest.raises(SourceNotFound):
        await ReindexSource(app.uow).execute(Caller(org_id=app.ids.new(), role=Role.ADMIN), indexed.source.id)  # type: ignore[arg-type]
