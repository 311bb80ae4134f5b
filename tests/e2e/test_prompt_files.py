"""The prompts directory while the server runs: templates appear, change and go, and MCP clients are told."""

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from application.use_cases.organizations import CreateOrganizationCommand
from infrastructure.container import Container
from tests.conftest import PROMPT_FILES_ORG, Tenant
from tests.e2e.mcp_changes import both_generations, next_change
from tests.e2e.test_mcp_server import mcp_client, text_of

YAML = """name: daily-digest
description: Summarise the day for a team
agent: digest-bot
arguments:
  - {name: team, required: true}
messages:
  - role: user
    content: "Digest for {team}."
"""
CHATMD = """<system>You triage tickets. Be brief.</system>
<user>Triage: {ticket}</user>
"""


async def changes_until(changes: Any, done: Callable[[], Awaitable[bool]]) -> None:
    """Reads list_changed notifications until done() holds. The server polls the directory, so files written or
    deleted together may be seen in one poll or in two: a test waits for the state it expects, not for one
    notification, and it ends only once the server has seen the directory as the test found it (a change still
    on its way would be the next test's first notification, taken for that test's own file)."""

    async def read() -> None:
        notifications: AsyncIterator[object] = aiter(changes)
        while True:
            await anext(notifications)
            if await done():
                return

    await asyncio.wait_for(read(), 10)


def files_listed(client: httpx.AsyncClient, tenant: Tenant, *names: str) -> Callable[[], Awaitable[bool]]:
    """Whether the organization's templates from files are exactly these."""

    async def check() -> bool:
        listed = (await client.get("/v1/prompt-templates", headers=tenant.admin)).json()["data"]
        return [t["name"] for t in listed if t["source"] == "file"] == list(names)

    return check


@pytest.fixture(scope="module")
async def files_org(container: Container, client: httpx.AsyncClient) -> Tenant:
    created = await container.create_organization().execute(
        CreateOrganizationCommand(name="Prompt files", slug=PROMPT_FILES_ORG)
    )
    admin = {"Authorization": f"Bearer {created.admin_key_plaintext}"}
    await client.post(
        "/v1/agents", json={"name": "Digest bot", "slug": "digest-bot", "model": "threadline-offline"}, headers=admin
    )
    return Tenant(id=str(created.organization.id), slug=PROMPT_FILES_ORG, admin=admin)


async def test_file_templates_come_and_go_and_clients_are_told(
    container: Container,
    client: httpx.AsyncClient,
    live_url: str,
    files_org: Tenant,
    caplog: pytest.LogCaptureFixture,
) -> None:
    directory = container.settings().prompts_dir
    assert directory is not None
    async with mcp_client(live_url, files_org) as session, session.listen(tools_list_changed=True) as changes:
        assert (await session.list_tools()).tools == []

        (directory / "daily-digest.yaml").write_text(YAML)
        (directory / "triage.chatmd").write_text(CHATMD)
        (directory / "broken.yaml").write_text("name: [unclosed\n")
        await changes_until(changes, files_listed(client, files_org, "daily-digest", "triage"))
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"daily_digest", "triage"}
        assert tools["triage"].input_schema["required"] == ["ticket"]
        answer = await session.call_tool("daily_digest", {"team": "platform"})
        assert answer.is_error is False and "Digest for platform." in text_of(answer.content[0])

        async def described_as_weekly() -> bool:
            # A poll may catch the file half rewritten: the template is skipped, then back at the next poll.
            prompts = {p.name: p for p in (await session.list_prompts()).prompts}
            digest = prompts.get("daily-digest")
            return digest is not None and digest.description == "Summarize the week for a team"

        (directory / "daily-digest.yaml").write_text(YAML.replace("Summarise the day", "Summarize the week"))
        await changes_until(changes, described_as_weekly)

        (directory / "daily-digest.yaml").unlink()
        await changes_until(changes, files_listed(client, files_org, "triage"))
        assert {t.name for t in (await session.list_tools()).tools} == {"triage"}
        listed = (await client.get("/v1/prompt-templates", headers=files_org.admin)).json()["data"]
        assert "collides with an agent slug" not in caplog.text
        assert [(t["name"], t["source"]) for t in listed] == [("triage", "file")]

        (directory / "broken.yaml").unlink()  # first: once the server sees triage gone, it has seen this gone too
        (directory / "triage.chatmd").unlink()
        await changes_until(changes, files_listed(client, files_org))
        assert (await session.list_tools()).tools == []


async def test_a_file_template_named_like_an_agent_is_reported_and_the_agent_keeps_the_name(
    container: Container,
    client: httpx.AsyncClient,
    live_url: str,
    files_org: Tenant,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="infrastructure.template_files.registry")
    agent_url = f"/v1/agents/{(await client.get('/v1/agents', headers=files_org.admin)).json()['data'][0]['id']}"
    await client.patch(agent_url, json={"publish_as_mcp": True}, headers=files_org.admin)
    directory = container.settings().prompts_dir
    assert directory is not None
    async with mcp_client(live_url, files_org) as session, session.listen(tools_list_changed=True) as changes:
        (directory / "digest-bot.yaml").write_text(YAML.replace("daily-digest", "digest-bot"))
        await changes_until(changes, files_listed(client, files_org, "digest-bot"))
        tools = {t.name: t for t in (await session.list_tools()).tools}

        (directory / "digest-bot.yaml").unlink()
        await changes_until(changes, files_listed(client, files_org))
    await client.patch(agent_url, json={"publish_as_mcp": False}, headers=files_org.admin)
    assert list(tools) == ["digest-bot"]
    assert tools["digest-bot"].input_schema["required"] == ["input"]  # the agent's tool, not the template's
    reported = [r for r in caplog.records if "collides with an agent slug" in r.getMessage()]
    # the registry logs them as the records' extra attributes
    assert [(vars(r)["template"], vars(r)["agent_slug"]) for r in reported] == [("digest-bot", "digest-bot")]


async def test_a_template_file_change_is_told_to_both_protocol_generations(
    container: Container, client: httpx.AsyncClient, live_url: str, files_org: Tenant
) -> None:
    directory = container.settings().prompts_dir
    assert directory is not None
    async with both_generations(live_url, files_org) as (legacy, changes):
        (directory / "daily-digest.yaml").write_text(YAML)
        await legacy.wait_for("notifications/tools/list_changed", 1)
        await legacy.wait_for("notifications/prompts/list_changed", 1)
        await next_change(changes)
        (directory / "daily-digest.yaml").unlink()
        await changes_until(changes, files_listed(client, files_org))
        await legacy.wait_for("notifications/tools/list_changed", 2)
