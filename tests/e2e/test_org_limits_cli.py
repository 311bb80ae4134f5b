"""`threadline orgs set-limits` and `set-language`: the operator gives an organization limits (and a search
language) of its own; the audit log tells."""

import os
from collections.abc import Iterator

import httpx
import pytest

from application.use_cases.organizations import SetOrganizationLimitsCommand
from infrastructure.container import Container
from tests.conftest import Tenant
from tests.databases import fresh_database
from tests.e2e.test_cli import cli


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with fresh_database(tmp_path_factory.mktemp("limits")) as url:
        environment = os.environ | {"THREADLINE_DATABASE_URL": url, "THREADLINE_LOG_FORMAT": "text"}
        assert cli(environment, "migrate").returncode == 0
        yield environment


def test_limits_are_set_kept_and_cleared_back_to_the_deployments(env: dict[str, str]) -> None:
    created = cli(env, "orgs", "create", "Limited Inc", "--slug", "limited")
    assert created.returncode == 0, created.stderr
    first = cli(env, "orgs", "set-limits", "limited", "--max-concurrent-runs", "2", "--runs-per-minute", "30")
    assert first.returncode == 0, first.stderr
    assert "max concurrent runs: 2" in first.stdout and "runs per minute: 30" in first.stdout
    kept = cli(env, "orgs", "set-limits", "limited", "--runs-per-minute", "0")  # only the rate goes back
    assert "max concurrent runs: 2" in kept.stdout and "runs per minute: no limit" in kept.stdout
    cleared = cli(env, "orgs", "set-limits", "limited", "--max-concurrent-runs", "0")
    assert "max concurrent runs: 32 (deployment default)" in cleared.stdout


def test_bad_limits_and_unknown_organizations_are_refused(env: dict[str, str]) -> None:
    assert cli(env, "orgs", "create", "Refused", "--slug", "refused").returncode == 0
    negative = cli(env, "orgs", "set-limits", "refused", "--max-concurrent-runs", "-1")
    assert negative.returncode != 0 and "max_concurrent_runs must be" in negative.stderr + negative.stdout
    unknown = cli(env, "orgs", "set-limits", "nobody", "--runs-per-minute", "5")
    assert unknown.returncode != 0 and "no organization with slug 'nobody'" in unknown.stderr + unknown.stdout


async def test_a_limits_change_is_one_audit_event_of_the_operator(
    client: httpx.AsyncClient, container: Container, tenant: Tenant
) -> None:
    for concurrent in (4, 4, 6):  # the second changes nothing, and is no event
        await container.set_organization_limits().execute(
            SetOrganizationLimitsCommand(slug=tenant.slug, max_concurrent_runs=concurrent, runs_per_minute=None)
        )
    listed = await client.get("/v1/audit-events?type=organization.limits_changed", headers=tenant.admin)
    assert listed.status_code == 200, listed.text
    events = listed.json()["data"]
    assert [(e["object_type"], e["object_id"], e["actor_key_id"]) for e in events] == [
        ("organization", tenant.id, None),
        ("organization", tenant.id, None),
    ]
    assert [e["changes"] for e in events] == [
        [{"field": "max_concurrent_runs", "old": None, "new": 4}],
        [{"field": "max_concurrent_runs", "old": 4, "new": 6}],
    ]


def test_the_operator_sets_an_organizations_search_language(env: dict[str, str]) -> None:
    assert cli(env, "orgs", "create", "Langues", "--slug", "langues").returncode == 0
    changed = cli(env, "orgs", "set-language", "langues", "french")
    assert changed.returncode == 0, changed.stderr
    assert "search language: french" in changed.stdout
    unknown = cli(env, "orgs", "set-language", "langues", "klingon")
    assert unknown.returncode != 0 and "search_language must be one of" in unknown.stderr + unknown.stdout
    assert "Traceback" not in unknown.stderr
