"""Threads, their messages and their sources on fakes: what belongs to whom, the order of messages, paging."""

from datetime import timedelta

import pytest

from application.errors import AgentNotFound, InvalidCursor, InvalidReference, SourceNotFound, ThreadNotFound
from application.pagination import PageRequest
from application.use_cases.native_tools import ListNativeTools
from application.use_cases.sources import GetSource, ListSources
from application.use_cases.threads import (
    AppendUserMessage,
    AppendUserMessageCommand,
    CreateThread,
    CreateThreadCommand,
    DeleteThread,
    GetThread,
    ListMessages,
    ListThreads,
)
from domain.agents import Agent
from domain.errors import InvalidValue
from domain.ids import AgentId, SourceId, ThreadId
from domain.messages import ImageContent, Message, MessageRole, TextContent, ToolResultContent
from domain.native_tools import NATIVE_TOOL_TYPES
from domain.organizations import Organization
from domain.sources import CreatedBy, Source, SourceKind, SourceOrigin
from domain.threads import Thread
from tests.unit.fakes.app import FakeApp, admin, member
from tests.unit.fakes.ports import NOW


@pytest.fixture
def app() -> FakeApp:
    return FakeApp()


def create_thread(app: FakeApp) -> CreateThread:
    return CreateThread(app.uow, app.clock, app.ids)


async def say(app: FakeApp, thread: Thread, *texts: str) -> list[Message]:
    append = AppendUserMessage(app.uow, app.clock, app.ids)
    return [
        await append.execute(
            AppendUserMessageCommand(caller=member(thread.org_id), thread_id=thread.id, content=(TextContent(text=t),))
        )
        for t in texts
    ]


async def source(
    app: FakeApp, org: Organization, *, thread: Thread | None = None, agent: Agent | None = None
) -> Source:
    found = Source(
        id=SourceId(app.ids.new()),
        org_id=org.id,
        kind=SourceKind.TEXT,
        name="notes.txt",
        origin=SourceOrigin(type="upload"),
        mime_type="text/plain",
        size=5,
        created_by=CreatedBy.USER,
        created_at=NOW,
        thread_id=thread.id if thread else None,
        agent_id=agent.id if agent else None,
        text="notes",
    )
    async with app.uow as uow:
        await uow.sources.add(found)
        await uow.commit()
    return found


# -- CreateThread, GetThread, ListThreads, DeleteThread ------------------------------------------------


async def test_a_thread_is_created_for_an_agent_of_the_organization(app: FakeApp) -> None:
    org = await app.organization()
    agent = await app.agent(org)
    command = CreateThreadCommand(caller=member(org), agent_id=agent.id, title="Billing", metadata={"user": "42"})
    thread = await create_thread(app).execute(command)
    assert (thread.org_id, thread.agent_id, thread.title, thread.metadata) == (
        org.id,
        agent.id,
        "Billing",
        {"user": "42"},
    )
    assert (thread.message_count, thread.created_at) == (0, NOW)
    assert app.store.threads == {thread.id: thread}


async def test_a_thread_without_an_agent_may_be_created(app: FakeApp) -> None:
    org = await app.organization()
    thread = await create_thread(app).execute(CreateThreadCommand(caller=member(org)))
    assert thread.agent_id is None and thread.id in app.store.threads


async def test_a_thread_for_another_organizations_agent_is_refused(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    theirs = await app.agent(other)
    with pytest.raises(InvalidReference):
        await create_thread(app).execute(CreateThreadCommand(caller=member(org), agent_id=theirs.id))
    assert app.store.threads == {}


async def test_metadata_over_the_limits_is_refused(app: FakeApp) -> None:
    org = await app.organization()
    with pytest.raises(InvalidValue, match="metadata"):
        await create_thread(app).execute(CreateThreadCommand(caller=member(org), metadata={"k": "v" * 513}))
    assert app.store.threads == {}


async def test_a_thread_is_read_by_its_organization_only(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    thread = await app.thread(await app.agent(org))
    assert (await GetThread(app.uow).execute(member(org), thread.id)).id == thread.id
    with pytest.raises(ThreadNotFound):
        await GetThread(app.uow).execute(admin(other), thread.id)


async def test_threads_are_listed_page_by_page_and_by_agent(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    first, second = await app.agent(org), await app.agent(org)
    of_first = [await app.thread(first) for _ in range(3)]
    of_second = await app.thread(second)
    await app.thread(await app.agent(other))
    page = await ListThreads(app.uow).execute(member(org), PageRequest(limit=3))
    rest = await ListThreads(app.uow).execute(member(org), PageRequest(limit=3, cursor=page.next_cursor))
    assert sorted(t.id for t in [*page.items, *rest.items]) == sorted([*(t.id for t in of_first), of_second.id])
    assert len(page.items) == 3 and rest.next_cursor is None
    by_agent = await ListThreads(app.uow).execute(member(org), PageRequest(), agent_id=second.id)
    assert [t.id for t in by_agent.items] == [of_second.id]


async def test_deleting_a_thread_deletes_its_messages(app: FakeApp) -> None:
    org = await app.organization()
    agent = await app.agent(org)
    thread, kept = await app.thread(agent), await app.thread(agent)
    await say(app, thread, "one", "two")
    [other_message] = await say(app, kept, "stays")
    await DeleteThread(app.uow).execute(member(org), thread.id)
    assert set(app.store.threads) == {kept.id}
    assert list(app.store.messages) == [other_message.id]


async def test_another_organizations_thread_cannot_be_deleted(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    thread = await app.thread(await app.agent(org))
    with pytest.raises(ThreadNotFound):
        await DeleteThread(app.uow).execute(admin(other), thread.id)
    assert thread.id in app.store.threads


# -- AppendUserMessage, ListMessages ------------------------------------------------------------------


async def test_messages_are_numbered_in_the_order_they_are_appended(app: FakeApp) -> None:
    org = await app.organization()
    thread = await app.thread(await app.agent(org))
    app.clock.advance(30)
    first, second = await say(app, thread, "Hello", "Are you there?")
    assert (first.position, second.position) == (1, 2)
    assert (first.role, first.text, first.thread_id, first.org_id) == (MessageRole.USER, "Hello", thread.id, org.id)
    saved = app.store.threads[thread.id]
    assert saved.message_count == 2 and saved.updated_at == NOW + timedelta(seconds=30)


async def test_a_user_message_may_carry_an_image(app: FakeApp) -> None:
    org = await app.organization()
    thread = await app.thread(await app.agent(org))
    content = (TextContent(text="What is this?"), ImageContent(url="https://example.com/cat.png"))
    message = await AppendUserMessage(app.uow, app.clock, app.ids).execute(
        AppendUserMessageCommand(caller=member(org), thread_id=thread.id, content=content)
    )
    assert app.store.messages[message.id].content == content


async def test_a_user_message_cannot_carry_a_tool_result(app: FakeApp) -> None:
    org = await app.organization()
    thread = await app.thread(await app.agent(org))
    content = (ToolResultContent(tool_use_id="c1", tool_name="t", result="forged"),)
    with pytest.raises(InvalidValue):
        await AppendUserMessage(app.uow, app.clock, app.ids).execute(
            AppendUserMessageCommand(caller=member(org), thread_id=thread.id, content=content)
        )
    assert app.store.messages == {} and app.store.threads[thread.id].message_count == 0


async def test_no_message_is_appended_to_another_organizations_thread(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    thread = await app.thread(await app.agent(org))
    with pytest.raises(ThreadNotFound):
        await AppendUserMessage(app.uow, app.clock, app.ids).execute(
            AppendUserMessageCommand(caller=member(other), thread_id=thread.id, content=(TextContent(text="hi"),))
        )
    assert app.store.messages == {}


async def test_messages_are_listed_in_order_page_by_page(app: FakeApp) -> None:
    org = await app.organization()
    thread = await app.thread(await app.agent(org))
    await say(app, thread, "1", "2", "3", "4", "5")
    texts, cursor = [], None
    while True:
        page = await ListMessages(app.uow).execute(member(org), thread.id, PageRequest(limit=2, cursor=cursor))
        texts.append([m.text for m in page.items])
        if (cursor := page.next_cursor) is None:
            break
    assert texts == [["1", "2"], ["3", "4"], ["5"]]


async def test_messages_of_another_organizations_thread_are_not_listed(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    thread = await app.thread(await app.agent(org))
    await say(app, thread, "secret")
    with pytest.raises(ThreadNotFound):
        await ListMessages(app.uow).execute(member(other), thread.id, PageRequest())


async def test_an_id_cursor_is_not_a_message_cursor(app: FakeApp) -> None:
    org = await app.organization()
    agent = await app.agent(org)
    threads = [await app.thread(agent) for _ in range(2)]
    id_cursor = (await ListThreads(app.uow).execute(member(org), PageRequest(limit=1))).next_cursor
    with pytest.raises(InvalidCursor):
        await ListMessages(app.uow).execute(member(org), threads[0].id, PageRequest(cursor=id_cursor))


# -- ListSources, GetSource -----------------------------------------------------------------------------


async def test_sources_are_listed_by_thread_or_by_agent_without_their_content(app: FakeApp) -> None:
    org = await app.organization()
    agent = await app.agent(org)
    thread, other_thread = await app.thread(agent), await app.thread(agent)
    in_thread = await source(app, org, thread=thread)
    await source(app, org, thread=other_thread)
    of_agent = await source(app, org, agent=agent)
    listed = await ListSources(app.uow).execute(member(org), PageRequest(), thread_id=thread.id)
    assert [s.id for s in listed.items] == [in_thread.id]
    assert not hasattr(listed.items[0], "text")
    by_agent = await ListSources(app.uow).execute(member(org), PageRequest(), agent_id=agent.id)
    assert [s.id for s in by_agent.items] == [of_agent.id]


async def test_sources_are_paged(app: FakeApp) -> None:
    org = await app.organization()
    thread = await app.thread(await app.agent(org))
    made = [await source(app, org, thread=thread) for _ in range(3)]
    first = await ListSources(app.uow).execute(member(org), PageRequest(limit=2), thread_id=thread.id)
    rest = await ListSources(app.uow).execute(
        member(org), PageRequest(limit=2, cursor=first.next_cursor), thread_id=thread.id
    )
    assert [s.id for s in [*first.items, *rest.items]] == [s.id for s in made]
    assert rest.next_cursor is None


async def test_sources_of_another_organizations_thread_or_agent_are_not_found(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    agent = await app.agent(org)
    thread = await app.thread(agent)
    await source(app, org, thread=thread)
    with pytest.raises(ThreadNotFound):
        await ListSources(app.uow).execute(member(other), PageRequest(), thread_id=thread.id)
    with pytest.raises(AgentNotFound):
        await ListSources(app.uow).execute(member(other), PageRequest(), agent_id=agent.id)
    with pytest.raises(ThreadNotFound):
        await ListSources(app.uow).execute(member(org), PageRequest(), thread_id=ThreadId(app.ids.new()))
    with pytest.raises(AgentNotFound):
        await ListSources(app.uow).execute(member(org), PageRequest(), agent_id=AgentId(app.ids.new()))


async def test_a_source_is_read_with_its_content_by_its_organization_only(app: FakeApp) -> None:
    org, other = await app.organization(), await app.organization()
    made = await source(app, org, thread=await app.thread(await app.agent(org)))
    assert (await GetSource(app.uow).execute(member(org), made.id)).text == "notes"
    with pytest.raises(SourceNotFound):
        await GetSource(app.uow).execute(member(other), made.id)


# -- ListNativeTools ------------------------------------------------------------------------------------


async def test_the_native_tools_listed_are_those_an_agent_may_reference() -> None:
    listed = await ListNativeTools().execute()
    assert {spec.type for spec in listed} == NATIVE_TOOL_TYPES
    assert len({spec.name for spec in listed}) == len(listed)
