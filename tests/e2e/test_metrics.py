"""/metrics: the Prometheus text format for the operator's token only, and its numbers move as runs run."""

from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from infrastructure.settings import Settings
from tests.conftest import Tenant
from tests.e2e.runs import agent_and_thread, settle, start
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall

TOKEN = "operator metrics token"
OPERATOR = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def metrics_token(settings: Settings) -> Iterator[str]:
    settings.metrics_token = SecretStr(TOKEN)
    try:
        yield TOKEN
    finally:
        settings.metrics_token = None


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(client: httpx.AsyncClient) -> Samples:
    response = await client.get("/metrics", headers=OPERATOR)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_without_the_operators_token_there_are_no_metrics(
    client: httpx.AsyncClient, tenant: Tenant, metrics_token: str
) -> None:
    assert (await client.get("/metrics")).status_code == 401
    refused = await client.get("/metrics", headers=tenant.admin)  # an API key is not the operator's token
    assert refused.status_code == 401 and refused.json()["error"] == "NotAuthenticated"


async def test_metrics_do_not_exist_unless_the_operator_set_a_token(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.get("/metrics", headers=tenant.admin)
    assert response.status_code == 404 and response.json()["error"] == "NotFound"


async def test_metrics_move_when_runs_run(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, metrics_token: str
) -> None:
    before = await scrape(client)
    _agent, thread = await agent_and_thread(client, tenant)
    openai.reply_text("Hello.", prompt_tokens=11, completion_tokens=3)
    completed = await settle(client, tenant, (await start(client, tenant, thread, input="hi"))["id"])
    assert completed["status"] == "completed"
    openai.reply_error(400, "no such model")
    failed = await settle(client, tenant, (await start(client, tenant, thread, input="again"))["id"])
    assert failed["status"] == "failed"
    after = await scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("threadline_runs_started_total") == 2
    assert moved("threadline_runs_finished_total", status="completed") == 1
    assert moved("threadline_runs_finished_total", status="failed") == 1
    assert moved("threadline_run_duration_seconds_count", status="completed") == 1
    assert moved("threadline_run_queued_seconds_count") == 2
    assert moved("threadline_model_call_duration_seconds_count", model="gpt-test", outcome="ok") == 1
    assert moved("threadline_model_call_duration_seconds_count", model="gpt-test", outcome="error") == 1
    assert moved("threadline_model_tokens_total", model="gpt-test", kind="input") == 11
    assert moved("threadline_model_tokens_total", model="gpt-test", kind="output") == 3
    route = "/v1/threads/{thread_id}/runs"
    assert moved("threadline_http_requests_total", method="POST", route=route, status="201") == 2
    assert value(after, "threadline_sse_streams_open") == 0  # the runs' event streams were followed, then closed
    assert not any(thread["id"] in name or thread["id"] in str(labels) for name, labels in after)  # templates only


async def test_mcp_calls_are_counted_by_integration_id(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, mcp_server: FakeMcpServer, metrics_token: str
) -> None:
    before = await scrape(client)
    integration = (
        await client.post("/v1/mcp-integrations", json={"name": "Memo", "url": mcp_server.url}, headers=tenant.admin)
    ).json()
    _agent, thread = await agent_and_thread(client, tenant, mcp_integration_ids=[integration["id"]])
    openai.reply_tool_calls(FakeToolCall("memo__echo", {"message": "hi"}))
    openai.reply_text("Done.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="go"))["id"])
    assert run["status"] == "completed"
    after = await scrape(client)
    labels = {"integration_id": integration["id"], "operation": "tool"}
    assert (
        value(after, "threadline_mcp_call_duration_seconds_count", **labels)
        - value(before, "threadline_mcp_call_duration_seconds_count", **labels)
        == 1
    )
    assert value(after, "threadline_mcp_call_errors_total", **labels) == 0


async def test_a_made_up_http_method_is_counted_as_other(
    client: httpx.AsyncClient, tenant: Tenant, metrics_token: str
) -> None:
    for method in ("BREW", "WHEN", "BREW"):
        await client.request(method, "/v1/agents", headers=tenant.admin)
    samples = await scrape(client)
    methods = {dict(labels)["method"] for name, labels in samples if name == "threadline_http_requests_total"}
    assert "OTHER" in methods
    assert not methods & {"BREW", "WHEN"}


async def test_a_sub_agents_run_is_counted_like_any_other(
    client: httpx.AsyncClient, tenant: Tenant, openai: FakeOpenAI, metrics_token: str
) -> None:
    researcher = (
        await client.post("/v1/agents", json={"name": "Researcher", "model": "gpt-test"}, headers=tenant.admin)
    ).json()
    _, thread = await agent_and_thread(client, tenant, name="Lead", sub_agent_ids=[researcher["id"]])
    before = await scrape(client)
    openai.reply_tool_calls(FakeToolCall("agent__researcher", {"input": "Find the capital of Peru"}))
    openai.reply_text("Lima.")  # the researcher's answer, in a run of its own
    openai.reply_text("The researcher says: Lima.")
    run = await settle(client, tenant, (await start(client, tenant, thread, input="Capital of Peru?"))["id"])
    assert run["status"] == "completed"
    after = await scrape(client)
    assert value(after, "threadline_runs_started_total") - value(before, "threadline_runs_started_total") == 2
    finished = "threadline_runs_finished_total"
    assert value(after, finished, status="completed") - value(before, finished, status="completed") == 2
