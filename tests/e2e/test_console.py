"""The admin console in a real browser: headless Chromium on the console served by the suite's app over
real HTTP, talking to the REST API with the key a person signs in with."""

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from infrastructure.tracing import LangfuseTracer
from tests.conftest import Tenant
from tests.e2e.console_browser import SCREENSHOTS, chromium_executable, screenshots_wanted
from tests.e2e.runs import agent_and_thread, settle, start
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, TextReply
from tests.fakes.otlp_receiver import OtlpReceiver

playwright_api = pytest.importorskip(
    "playwright.async_api",
    reason="Playwright for Python is not installed: install the test extras (`python3 dev.py test`)",
)
CHROMIUM = chromium_executable()
if CHROMIUM is None:
    pytest.skip(
        "no Chromium found for the console's browser tests: install Debian's `chromium` package "
        "(`apt-get install chromium`) or set THREADLINE_CHROMIUM to a Chromium executable",
        allow_module_level=True,
    )

Page = playwright_api.Page
expect = playwright_api.expect
expect.set_options(timeout=15_000)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def page(browser: Any, live_url: str) -> AsyncIterator[Any]:
    context = await browser.new_context(viewport={"width": 1280, "height": 860}, base_url=live_url)
    context.set_default_timeout(15_000)
    opened = await context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    opened.on(
        "console",
        lambda message: (
            problems.append(f"console {message.type}: {message.text}")
            if message.type == "error" and "Content Security Policy" in message.text
            else None
        ),
    )
    try:
        yield opened
    finally:
        await context.close()
    assert not problems, problems


def bearer(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


async def screenshot(page: Any, name: str) -> None:
    if screenshots_wanted():
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        await page.evaluate("document.getElementById('toasts')?.remove()")
        await page.evaluate("document.activeElement?.blur(); window.scrollTo(0, 0)")  # the sticky header on top
        await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


async def sign_in(page: Any, key: str, hash_: str = "#/integrations") -> None:
    await page.goto(f"/console{hash_}")
    await page.get_by_label("API key").fill(key)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()


async def member_key(client: httpx.AsyncClient, tenant: Tenant, name: str = "member") -> str:
    response = await client.post("/v1/api-keys", json={"name": name, "role": "member"}, headers=tenant.admin)
    assert response.status_code == 201, response.text
    return str(response.json()["key"])


async def test_sign_in_with_a_key_and_out_again(page: Any, tenant: Tenant) -> None:
    await page.goto("/console")
    await screenshot(page, "sign-in")
    await page.get_by_label("API key").fill("tl_not_a_real_key")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_contain_text("This key was not accepted")

    await page.get_by_label("API key").fill(bearer(tenant.admin))
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator(".who")).to_contain_text("Acme")
    await expect(page.locator("[data-role]")).to_have_text("admin")
    assert await page.evaluate("document.cookie") == ""

    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert await page.evaluate("sessionStorage.length") == 0


async def test_an_admin_creates_a_key_sees_its_secret_once_and_revokes_it(
    page: Any, client: httpx.AsyncClient, tenant: Tenant
) -> None:
    await sign_in(page, bearer(tenant.admin), "#/keys")
    await page.get_by_label("Name").fill("web app")
    await page.get_by_role("button", name="Create key").click()
    secret = page.get_by_label("The new secret API key")
    await expect(secret).to_have_value(re.compile(r"^tl_"))
    key = await secret.input_value()
    assert (await client.get("/v1/me", headers={"Authorization": f"Bearer {key}"})).json()["role"] == "member"
    await expect(page.get_by_role("button", name="Copy")).to_be_visible()
    await screenshot(page, "api-keys")

    await page.get_by_role("button", name="Revoke key web app").click()
    await page.get_by_role("dialog").get_by_role("button", name="Revoke").click()
    await expect(page.locator("[data-key='web app']")).to_contain_text("revoked")
    assert (await client.get("/v1/me", headers={"Authorization": f"Bearer {key}"})).status_code == 401
    await page.reload()
    await expect(page.get_by_label("The new secret API key")).to_have_count(0)


async def test_revoking_the_key_in_use_signs_the_console_out(
    page: Any, client: httpx.AsyncClient, tenant: Tenant
) -> None:
    created = await client.post("/v1/api-keys", json={"name": "console", "role": "admin"}, headers=tenant.admin)
    await sign_in(page, created.json()["key"], "#/keys")
    await page.get_by_role("button", name="Revoke key console").click()
    await page.get_by_role("dialog").get_by_role("button", name="Revoke").click()
    await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    await expect(page.get_by_role("status")).to_contain_text("You revoked the key you were signed in with")
    assert await page.evaluate("sessionStorage.length") == 0


async def test_a_key_revoked_elsewhere_signs_the_console_out_at_its_next_request(
    page: Any, client: httpx.AsyncClient, tenant: Tenant
) -> None:
    created = (
        await client.post("/v1/api-keys", json={"name": "elsewhere", "role": "admin"}, headers=tenant.admin)
    ).json()
    await sign_in(page, created["key"], "#/keys")
    await expect(page.locator("[data-key='elsewhere']")).to_be_visible()
    await client.post(f"/v1/api-keys/{created['id']}/revoke", headers=tenant.admin)
    await page.get_by_role("link", name="Integrations", exact=True).first.click()
    await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    await expect(page.get_by_role("status")).to_contain_text("no longer accepted")


async def test_a_member_key_reaches_no_admin_action(page: Any, client: httpx.AsyncClient, tenant: Tenant) -> None:
    await sign_in(page, await member_key(client, tenant), "#/keys")
    await expect(page.locator("[data-role]")).to_have_text("member")
    await expect(page.get_by_text("Only admins manage API keys.")).to_be_visible()
    await expect(page.get_by_role("button", name="Create key")).to_have_count(0)
    await page.get_by_role("link", name="Integrations", exact=True).first.click()
    await expect(page.get_by_text("An admin of your organization can connect MCP servers")).to_be_visible()
    await expect(page.get_by_role("link", name="New integration")).to_have_count(0)
    await page.goto("/console#/integrations/new")
    await expect(page.get_by_text("Only admins change integrations.")).to_be_visible()
    await page.get_by_role("link", name="Prompt templates").click()
    await expect(page.get_by_text("An admin can create them")).to_be_visible()
    await expect(page.get_by_role("link", name="New template")).to_have_count(0)

    # What the page could send with the member's key, the REST API refuses.
    statuses = await page.evaluate(
        """async () => {
            const key = JSON.parse(sessionStorage.getItem("threadline.console")).key;
            const auth = {Authorization: `Bearer ${key}`, "Content-Type": "application/json"};
            const key_ = await fetch("/v1/api-keys",
                {method: "POST", headers: auth, body: JSON.stringify({name: "x"})});
            const integration = await fetch("/v1/mcp-integrations", {method: "POST", headers: auth,
                body: JSON.stringify({name: "x", url: "http://127.0.0.1:9/mcp"})});
            return [key_.status, integration.status];
        }"""
    )
    assert statuses == [403, 403]


async def test_an_admin_connects_an_mcp_server_tests_it_and_calls_its_tools(
    page: Any, client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer
) -> None:
    await sign_in(page, bearer(tenant.admin))
    await expect(page.get_by_text("No MCP servers connected yet.")).to_be_visible()
    await page.get_by_role("link", name="New integration").click()
    await page.get_by_role("textbox", name="Name", exact=True).fill("Memo")
    await page.get_by_label("Server URL").fill(mcp_server.url)
    await page.get_by_role("button", name="Create integration").click()

    await expect(page.get_by_role("heading", name="Memo")).to_be_visible()
    await expect(page.locator("[data-last-checked]")).to_have_text("never")
    await page.get_by_role("button", name="Test connection").click()
    await expect(page.get_by_role("status").filter(has_text="Connected.")).to_contain_text("fake-mcp 1.2.3")
    await expect(page.locator(".health")).to_contain_text("connected")
    await expect(page.locator("[data-last-checked]")).not_to_have_text("never")  # without reloading the page

    await page.get_by_role("tab", name="Tools").click()
    echo = page.locator("[data-tool='echo']")
    await echo.get_by_text("Try echo").click()
    await echo.get_by_label("message").fill("hello from the console")
    await echo.get_by_role("button", name="Call tool").click()
    await expect(echo.locator("[data-tool-result='echo']")).to_have_text("Echo: hello from the console")
    await screenshot(page, "integration")

    failing = page.locator("[data-tool='fail']")
    await failing.get_by_text("Try fail").click()
    await failing.get_by_role("button", name="Call tool").click()
    await expect(failing.get_by_role("alert")).to_contain_text("it broke")

    await page.get_by_role("tab", name="Resources").click()
    notes = page.locator("[data-resource='memo://notes']")
    await notes.get_by_role("button", name="Read Notes").click()
    await expect(notes).to_contain_text("Remember the milk.")
    shopping = (await client.post("/v1/threads", json={"title": "Shopping"}, headers=tenant.admin)).json()
    await notes.get_by_text("Import into a thread").click()
    picker = notes.get_by_label("Thread")
    await expect(picker.locator("option", has_text="Shopping")).to_have_count(1)  # chosen by its title
    await picker.select_option(shopping["id"])
    await notes.get_by_role("button", name="Import into thread").click()
    await expect(notes.get_by_role("status")).to_contain_text("Imported as a source of Shopping")
    sources = await client.get(f"/v1/threads/{shopping['id']}/sources", headers=tenant.admin)
    assert len(sources.json()["data"]) == 1

    await page.get_by_role("tab", name="Prompts").click()
    greet = page.locator("[data-prompt='greet']")
    await greet.get_by_text("Try greet").click()
    await greet.get_by_role("button", name="Get prompt").click()
    await expect(greet.get_by_role("alert")).to_be_visible()  # the required argument is missing: a typed error
    await greet.get_by_label("name").fill("Ada")
    await greet.get_by_role("button", name="Get prompt").click()
    await expect(greet).to_contain_text("Say hello to Ada.")

    await page.get_by_role("link", name="Integrations", exact=True).first.click()
    await expect(page.locator("[data-integration='memo']")).to_contain_text("connected")
    await screenshot(page, "integrations")


@pytest.mark.executors
async def test_an_agent_linked_to_an_integration_answers_a_run_that_streams_in_live(
    page: Any, client: httpx.AsyncClient, tenant: Tenant, mcp_server: FakeMcpServer, openai: FakeOpenAI
) -> None:
    integration = await client.post(
        "/v1/mcp-integrations", json={"name": "Memo", "url": mcp_server.url}, headers=tenant.admin
    )
    assert integration.status_code == 201, integration.text
    await sign_in(page, bearer(tenant.admin), "#/agents")
    await expect(page.get_by_text("No agents yet.")).to_be_visible()
    await page.get_by_role("link", name="New agent").click()
    await page.get_by_role("textbox", name="Name", exact=True).fill("Helper")
    await page.get_by_role("combobox", name="Model").fill("gpt-test")
    await page.get_by_label("Instructions").fill("Answer briefly.")
    await page.get_by_label("Context window (tokens)").fill("16384")
    await page.get_by_label("Memo (memo__)").check()
    await page.get_by_role("button", name="Create agent").click()
    await expect(page.get_by_role("heading", name="Helper")).to_be_visible()
    agents = (await client.get("/v1/agents", headers=tenant.admin)).json()["data"]
    assert [a["model_settings"] for a in agents] == [{"context_tokens": 16384}]
    await expect(page.locator(".kv")).to_contain_text("Memo")
    await screenshot(page, "agent")

    openai.reply_tool_calls(FakeToolCall("memo__echo", {"message": "hi"}))
    held = openai.hold(first_text="The server said")
    await page.get_by_role("button", name="Start a thread").click()
    await page.get_by_role("textbox", name="Message").fill("Ask the memo server to echo hi")
    await page.get_by_role("button", name="Start run").click()

    answer = page.locator("[data-answer]").last
    await expect(answer).to_have_text("The server said")  # streamed in while the model still answers
    await expect(page.locator("[data-run-status]")).to_have_text("in progress")
    await expect(page.locator("[data-tool-call='memo__echo']")).to_contain_text("Echo: hi")
    await screenshot(page, "run")
    held.release(TextReply(" hi back."))
    await expect(page.locator("[data-run-status]")).to_have_text("completed")
    await expect(answer).to_have_text("The server said hi back.")
    assert mcp_server.calls[-1] == "echo"

    await page.get_by_role("link", name="Thread", exact=True).click()
    await expect(page.locator(".message.assistant").last).to_contain_text("The server said hi back.")
    await screenshot(page, "thread")


async def test_editing_an_agent_keeps_the_model_settings_the_form_does_not_show(
    page: Any, client: httpx.AsyncClient, tenant: Tenant
) -> None:
    settings = {"temperature": 0.2, "top_p": 0.9, "seed": 7, "presence_penalty": 0.5}
    created = await client.post("/v1/agents", json={"name": "Tuned", "model_settings": settings}, headers=tenant.admin)
    assert created.status_code == 201, created.text
    agent = created.json()
    await sign_in(page, bearer(tenant.admin), f"#/agents/{agent['id']}/edit")
    await page.get_by_label("Temperature").fill("0.4")
    await page.get_by_label("Instructions").fill("Be precise.")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.get_by_role("heading", name="Tuned", exact=True)).to_be_visible()
    saved = (await client.get(f"/v1/agents/{agent['id']}", headers=tenant.admin)).json()
    assert saved["instructions"] == "Be precise."
    assert saved["model_settings"] == {"temperature": 0.4, "top_p": 0.9, "seed": 7, "presence_penalty": 0.5}


@pytest.mark.executors
async def test_a_long_run_is_cancelled_from_its_page(
    page: Any, client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    _, thread = await agent_and_thread(client, tenant)
    held = openai.hold()
    run = await start(client, tenant, thread, input="Think for a long time")
    await sign_in(page, bearer(tenant.admin), f"#/runs/{run['id']}")
    await expect(page.locator("[data-run-status]")).to_have_text("in progress")
    await page.get_by_role("button", name="Cancel run").click()
    await expect(page.locator("[data-run-status]")).to_have_text("cancelled")
    await expect(page.get_by_role("button", name="Cancel run")).to_be_hidden()
    await asyncio.wait_for(held.abandoned.wait(), 10)  # the model call was stopped, not left running
    assert (await client.get(f"/v1/runs/{run['id']}", headers=tenant.admin)).json()["status"] == "cancelled"


async def test_a_traced_run_links_to_its_trace_in_langfuse(
    page: Any,
    client: httpx.AsyncClient,
    tenant: Tenant,
    openai: FakeOpenAI,
    traced: tuple[LangfuseTracer, OtlpReceiver],
) -> None:
    _, receiver = traced
    _, thread = await agent_and_thread(client, tenant)
    openai.reply_text("Traced.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="hi"))["id"])
    assert run["trace_id"]
    await sign_in(page, bearer(tenant.admin), f"#/runs/{run['id']}")
    trace = page.get_by_role("link", name="Open its trace in Langfuse")
    await expect(trace).to_have_attribute("href", f"{receiver.base_url}/trace/{run['trace_id']}")


async def test_an_untraced_run_has_no_trace_link(
    page: Any, client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    _, thread = await agent_and_thread(client, tenant)
    openai.reply_text("Not traced.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="hi"))["id"])
    await sign_in(page, bearer(tenant.admin), f"#/runs/{run['id']}")
    await expect(page.locator("[data-run-status]")).to_have_text("completed")
    await expect(page.locator("[data-usage]")).to_be_visible()
    await expect(page.get_by_role("link", name="Open its trace in Langfuse")).to_have_count(0)


LOCAL_TIME = """(iso) => {
    // What a person types in a datetime-local field for this instant, in the browser's time zone.
    const d = new Date(iso);
    const p = (n, width = 2) => String(n).padStart(width, "0");
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`
        + `:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}"""


async def test_runs_are_filtered_by_status_and_time_on_the_server(
    page: Any, client: httpx.AsyncClient, tenant: Tenant
) -> None:
    _, thread = await agent_and_thread(client, tenant, model="threadline-offline")
    first = await settle(client, tenant, (await start(client, tenant, thread, input="one"))["id"])
    second = await settle(client, tenant, (await start(client, tenant, thread, input="two"))["id"])
    await sign_in(page, bearer(tenant.admin), "#/runs")
    await expect(page.locator("[data-run]")).to_have_count(2)

    await page.get_by_label("Created after").fill(await page.evaluate(LOCAL_TIME, second["created_at"]))
    await page.get_by_role("button", name="Apply filters").click()
    await expect(page.locator("[data-run]")).to_have_count(1)
    await expect(page.locator(f"[data-run='{second['id']}']")).to_be_visible()

    await page.get_by_label("Created after").fill("")
    await page.get_by_label("Created before").fill(await page.evaluate(LOCAL_TIME, second["created_at"]))
    await page.get_by_role("button", name="Apply filters").click()
    await expect(page.locator("[data-run]")).to_have_count(1)
    await expect(page.locator(f"[data-run='{first['id']}']")).to_be_visible()

    await page.get_by_label("Status").select_option("failed")
    await page.get_by_role("button", name="Apply filters").click()
    await expect(page.get_by_text("No runs match.")).to_be_visible()


@pytest.mark.executors
async def test_a_run_waiting_for_a_client_tool_is_answered_from_its_page(
    page: Any, client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    _, thread = await agent_and_thread(client, tenant, tools=[{"type": "send_email"}])
    email = {"to": ["ada@example.com"], "subject": "Hello", "body": "Hi Ada"}
    openai.reply_tool_calls(FakeToolCall("send_email", email, id="call_mail"))
    openai.reply_text("The email is on its way.")
    run = await start(client, tenant, thread, input="Email Ada")
    await sign_in(page, bearer(tenant.admin), f"#/runs/{run['id']}")
    await expect(page.locator("[data-run-status]")).to_have_text("requires action")
    pending = page.locator("[data-pending='send_email']")
    await expect(pending).to_contain_text("ada@example.com")
    await screenshot(page, "requires-action")
    await pending.get_by_label("Result of send_email").fill("sent, message id 42")
    await page.get_by_role("button", name="Send results").click()
    await expect(page.locator("[data-run-status]")).to_have_text("completed")
    await expect(page.locator("[data-answer]").last).to_have_text("The email is on its way.")
    tool_message = openai.requests[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "sent, message id 42"


async def test_a_question_of_an_mcp_tool_is_answered_from_the_runs_page(
    page: Any, client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI
) -> None:
    async with FakeMcpServer(asks=True) as tables:
        integration = await client.post(
            "/v1/mcp-integrations", json={"name": "Tables", "url": tables.url}, headers=tenant.admin
        )
        _, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[integration.json()["id"]])
        openai.reply_tool_calls(FakeToolCall("tables__steps", {}, id="call_steps"))
        openai.reply_tool_calls(FakeToolCall("tables__reserve", {"restaurant": "Chez Ada"}, id="call_book"))
        openai.reply_text("Your table is booked.")
        run = await start(client, tenant, thread, input="Book Chez Ada")
        await sign_in(page, bearer(tenant.admin), f"#/runs/{run['id']}")
        await expect(page.locator("[data-run-status]")).to_have_text("requires action")
        await expect(page.locator("[data-log]")).to_have_count(3)  # the steps tool's log messages, told live
        question = page.locator("[data-question='tables__reserve']")
        await expect(question.locator("[data-question-message]")).to_have_text("How many guests at Chez Ada?")
        await screenshot(page, "question")
        await question.get_by_label("guests").fill("4")
        await page.get_by_role("button", name="Send answers").click()
        await expect(page.get_by_role("alert")).to_contain_text("name is required")  # refused, saying why
        await question.get_by_label("name").fill("Ada")
        await page.get_by_role("button", name="Send answers").click()
        await expect(page.locator("[data-run-status]")).to_have_text("completed")
        await expect(page.locator("[data-answer]").last).to_have_text("Your table is booked.")
    assert openai.requests[-1]["messages"][-1]["content"] == "Table for 4 at Chez Ada, name Ada"


async def test_a_prompt_template_is_edited_with_a_live_preview(
    page: Any, client: httpx.AsyncClient, tenant: Tenant
) -> None:
    agent, _ = await agent_and_thread(client, tenant, name="Writer")
    template = {
        "name": "release-notes",
        "description": "Write release notes",
        "arguments": [{"name": "version", "required": True}, {"name": "tone", "default": "neutral"}],
        "messages": [{"role": "user", "content": "Notes for {version} in a {tone} tone."}],
        "agent_id": agent["id"],
    }
    assert (await client.post("/v1/prompt-templates", json=template, headers=tenant.admin)).status_code == 201
    await sign_in(page, bearer(tenant.admin), "#/templates")
    item = page.locator("[data-template='release-notes']")
    await expect(item).to_contain_text("release_notes")  # the MCP tool it publishes
    await item.get_by_role("link", name="release-notes").click()

    preview = page.locator("[data-preview]")
    await expect(preview.get_by_role("alert")).to_contain_text("version")  # required and not given yet
    await page.get_by_label("version").fill("2.0")
    await expect(preview).to_have_text(re.compile("Notes for 2.0 in a neutral tone."))
    await page.get_by_label("tone").fill("friendly")
    await expect(preview).to_have_text(re.compile("Notes for 2.0 in a friendly tone."))

    # Unsaved edits are what the preview renders: a new argument and a changed message.
    await page.get_by_role("button", name="Add argument").click()
    await page.get_by_label("Argument name").last.fill("audience")
    await page.get_by_label("Default", exact=True).last.fill("developers")
    await page.get_by_label("Content").fill("Notes for {version} in a {tone} tone, for {audience}.")
    await expect(preview).to_have_text(re.compile("Notes for 2.0 in a friendly tone, for developers."))
    await page.get_by_label("audience").last.fill("operators")
    await expect(preview).to_have_text(re.compile("Notes for 2.0 in a friendly tone, for operators."))
    unsaved = (await client.get("/v1/prompt-templates/release-notes", headers=tenant.admin)).json()
    assert unsaved["messages"][0]["content"] == "Notes for {version} in a {tone} tone."
    await screenshot(page, "template")

    await page.get_by_label("Template description").fill("Release notes for a version")
    await page.get_by_role("button", name="Save template").click()
    await expect(page.get_by_text("Template saved.")).to_be_visible()
    saved = (await client.get("/v1/prompt-templates/release-notes", headers=tenant.admin)).json()
    assert saved["description"] == "Release notes for a version"
    assert saved["messages"][0]["content"] == "Notes for {version} in a {tone} tone, for {audience}."
    assert [a["name"] for a in saved["arguments"]] == ["version", "tone", "audience"]


UNREACHED_BY_TAB = """async () => {
    // Tab through the page, then list the visible, enabled controls focus never reached. Controls are
    // named by what a person sees of them, so a part of the page drawn again meanwhile is the same control.
    const controls = () => [...document.querySelectorAll("a[href], button, input, select, textarea, summary")]
        .filter((c) => c.checkVisibility() && !c.matches(":disabled") && c.type !== "hidden");
    const named = (c) => [c.tagName, c.name, c.getAttribute("href"), c.getAttribute("aria-label"),
        c.textContent.trim().slice(0, 60)].join("|");
    const reached = new Set();
    document.activeElement?.blur();
    for (let i = 0; i < controls().length * 2 + 10; i++) {
        await window.__tab();
        if (document.activeElement) reached.add(named(document.activeElement));
    }
    return controls().filter((c) => !reached.has(named(c))).map((c) => c.outerHTML.slice(0, 80));
}"""


async def check_page_at_390(page: Any, name: str, heading: str | re.Pattern[str]) -> None:
    await expect(page.get_by_role("heading", level=1)).to_have_text(heading)
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"{name} is {width} px wide at 390 px"
    unlabelled = await page.evaluate(
        """() => [...document.querySelectorAll("input, select, textarea")]
            .filter((c) => c.type !== "hidden" && !c.labels?.length && !c.getAttribute("aria-label"))
            .map((c) => c.name)"""
    )
    assert unlabelled == [], f"{name}: controls without a label: {unlabelled}"
    assert await page.evaluate(UNREACHED_BY_TAB) == [], f"{name}: controls the Tab key never reaches"


async def test_the_console_is_usable_by_keyboard_on_a_phone_wide_screen(
    browser: Any, live_url: str, client: httpx.AsyncClient, tenant: Tenant
) -> None:
    agent, thread = await agent_and_thread(client, tenant, model="threadline-offline")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="hello"))["id"])
    context = await browser.new_context(viewport={"width": 390, "height": 844}, base_url=live_url)
    try:
        page = await context.new_page()
        # Playwright presses Tab for the page, so the check above runs inside it with real key presses.
        await page.expose_function("__tab", lambda: page.keyboard.press("Tab"))
        await page.goto("/console")
        await page.keyboard.type(bearer(tenant.admin))  # the key field has the focus
        await page.keyboard.press("Enter")
        await expect(page.get_by_role("button", name="Sign out")).to_be_visible()
        for section in ("Integrations", "Agents", "Prompt templates", "Threads", "Runs", "API keys"):
            link = page.get_by_role("navigation").get_by_role("link", name=section)
            await link.focus()
            await page.keyboard.press("Enter")
            await check_page_at_390(page, section, section)
        for name, hash_, heading in (
            ("a new integration", "#/integrations/new", "New integration"),
            ("a new agent", "#/agents/new", "New agent"),
            ("an agent", f"#/agents/{agent['id']}", agent["name"]),
            ("importing ChatMD", "#/agents/import", "Import a ChatMD file"),
            ("a new template", "#/templates/new", "New template"),
            ("a thread", f"#/threads/{thread['id']}", thread["title"] or "Untitled thread"),
            ("a run", f"#/runs/{run['id']}", re.compile("^Run ")),
        ):
            await page.goto(f"/console{hash_}")
            await check_page_at_390(page, name, heading)
        await page.get_by_role("navigation").get_by_role("link", name="Agents").click()
        await expect(page.locator("[data-agent]")).to_have_count(1)
        await screenshot(page, "agents-narrow")
    finally:
        await context.close()


async def test_a_chatmd_file_is_imported_as_an_agent(page: Any, client: httpx.AsyncClient, tenant: Tenant) -> None:
    chatmd = (
        '<config model="gpt-test"/>\n<tool name="web_search"/>\n<tool name="apply_patch"/>\n'
        "<system>You triage support tickets. Be brief.</system>\n<user>Ticket: {input}</user>\n"
    )
    await sign_in(page, bearer(tenant.admin), "#/agents/import")
    chatmd_file = page.get_by_label("ChatMD file")
    await chatmd_file.set_input_files({"name": "broken.chatmd", "mimeType": "text/plain", "buffer": b"<system>x\n"})
    await expect(page.get_by_role("alert")).to_contain_text("broken.chatmd:1")  # the server's parser, its words
    await expect(page.get_by_role("button", name="Create agent")).to_be_disabled()
    await chatmd_file.set_input_files(
        {"name": "triage-bot.chatmd", "mimeType": "text/plain", "buffer": chatmd.encode()}
    )
    await expect(page.get_by_text("'apply_patch' has no Threadline counterpart")).to_be_visible()
    assert (await client.get("/v1/agents", headers=tenant.admin)).json()["data"] == []  # nothing before confirming
    await page.get_by_role("button", name="Create agent").click()
    await expect(page.get_by_role("heading", name="triage-bot", exact=True)).to_be_visible()
    agents = (await client.get("/v1/agents", headers=tenant.admin)).json()["data"]
    imported = next(a for a in agents if a["slug"] == "triage-bot")
    assert imported["instructions"] == "You triage support tickets. Be brief."
    assert imported["model"] == "gpt-test"
    assert [t["type"] for t in imported["tools"]] == ["internet_search"]
