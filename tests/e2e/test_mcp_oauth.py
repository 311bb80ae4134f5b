"""OAuth 2.1 integrations end to end: an authorization server and the MCP server it protects, both built with the
`mcp` SDK's auth support on loopback; the test plays the admin's browser and follows the redirects."""

import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

import httpx
import pytest
from cryptography.fernet import Fernet

from application.use_cases.integrations import RotateCredentialEncryption
from domain.ids import IntegrationId, OrgId
from infrastructure.container import Container
from infrastructure.security.secret_box import FernetSecretBox
from tests.conftest import MakeTenant, Tenant, as_port, member_headers
from tests.fakes.oauth_servers import OAuthProtectedMcp


@pytest.fixture
async def servers() -> AsyncIterator[OAuthProtectedMcp]:
    async with OAuthProtectedMcp() as started:
        yield started


async def create(client: httpx.AsyncClient, tenant: Tenant, url: str, **fields: object) -> dict[str, Any]:
    body = {"name": "Protected", "url": url, "auth_type": "oauth"} | fields
    response = await client.post("/v1/mcp-integrations", json=body, headers=tenant.admin)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def start(client: httpx.AsyncClient, tenant: Tenant, integration: dict[str, Any]) -> dict[str, Any]:
    response = await client.post(f"/v1/mcp-integrations/{integration['id']}/oauth/authorize", headers=tenant.admin)
    assert response.status_code == 200, response.text
    started: dict[str, Any] = response.json()
    return started


async def approve(authorize_url: str) -> str:
    """What the admin's browser does: the authorization server approves and redirects back; the callback's path
    and query, as the browser would request them."""
    async with httpx.AsyncClient() as browser:
        response = await browser.get(authorize_url)
    assert response.status_code in (302, 303, 307), response.text
    back = urlsplit(response.headers["location"])
    return f"{back.path}?{back.query}"


async def authorize(client: httpx.AsyncClient, tenant: Tenant, integration: dict[str, Any]) -> httpx.Response:
    started = await start(client, tenant, integration)
    return await client.get(await approve(started["authorize_url"]))


async def tools(client: httpx.AsyncClient, tenant: Tenant, integration: dict[str, Any]) -> httpx.Response:
    return await client.get(f"/v1/mcp-integrations/{integration['id']}/tools", headers=tenant.admin)


async def test_authorized_once_the_tools_are_listed_and_tokens_renew_silently(
    client: httpx.AsyncClient, tenant: Tenant, servers: OAuthProtectedMcp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    integration = await create(client, tenant, servers.mcp_url)
    assert (await tools(client, tenant, integration)).json()["error"] == "McpAuthFailed"

    started = await start(client, tenant, integration)
    assert started["authorize_url"].startswith(f"{servers.issuer}/authorize?")
    assert "code_challenge_method=S256" in started["authorize_url"]
    assert started["redirect_uri"].endswith(f"/v1/mcp-integrations/{integration['id']}/oauth/callback")
    assert len(servers.provider.clients) == 1  # registered itself: dynamic client registration
    completed = await client.get(await approve(started["authorize_url"]))
    assert completed.status_code == 200, completed.text
    assert completed.json()["id"] == integration["id"]

    listed = await tools(client, tenant, integration)
    assert listed.status_code == 200, listed.text
    assert {t["name"] for t in listed.json()["data"]} >= {"whoami", "echo"}

    servers.expire_access_tokens()
    called = await client.post(
        f"/v1/mcp-integrations/{integration['id']}/tools/whoami/call", json={"arguments": {}}, headers=tenant.admin
    )
    assert called.status_code == 200, called.text
    assert servers.provider.grants["refresh_token"] == 1 and servers.tool_calls == 1

    issued = [t.token for t in servers.provider.access.values()] + list(servers.provider.refresh)
    for text in [caplog.text, (await client.get("/v1/mcp-integrations", headers=tenant.admin)).text]:
        assert not any(token in text for token in issued)


async def test_a_revoked_grant_asks_an_admin_to_authorize_again(
    client: httpx.AsyncClient, tenant: Tenant, servers: OAuthProtectedMcp
) -> None:
    integration = await create(client, tenant, servers.mcp_url)
    assert (await authorize(client, tenant, integration)).status_code == 200
    assert (await tools(client, tenant, integration)).status_code == 200

    servers.revoke_grants()
    called = await client.post(
        f"/v1/mcp-integrations/{integration['id']}/tools/whoami/call", json={"arguments": {}}, headers=tenant.admin
    )
    assert called.status_code == 502, called.text
    failure = called.json()
    assert failure["error"] == "McpAuthFailed"
    assert f"POST /v1/mcp-integrations/{integration['id']}/oauth/authorize" in failure["detail"]

    assert (await authorize(client, tenant, integration)).status_code == 200
    again = await client.post(
        f"/v1/mcp-integrations/{integration['id']}/tools/whoami/call", json={"arguments": {}}, headers=tenant.admin
    )
    assert again.status_code == 200, again.text


async def test_tokens_are_stored_encrypted(
    client: httpx.AsyncClient, tenant: Tenant, servers: OAuthProtectedMcp, container: Container
) -> None:
    integration = await create(client, tenant, servers.mcp_url)
    assert (await authorize(client, tenant, integration)).status_code == 200
    grant = await container.oauth_grants().get(OrgId(UUID(tenant.id)), IntegrationId(UUID(integration["id"])))
    assert grant is not None and grant.tokens is not None and grant.registration is not None
    issued = [t.token for t in servers.provider.access.values()] + list(servers.provider.refresh)
    client_secrets = [c.client_secret for c in servers.provider.clients.values() if c.client_secret]
    assert issued and client_secrets
    assert not any(secret in grant.tokens + grant.registration for secret in issued + client_secrets)


async def test_a_state_completes_one_authorization_only(
    client: httpx.AsyncClient, tenant: Tenant, servers: OAuthProtectedMcp
) -> None:
    integration = await create(client, tenant, servers.mcp_url)
    callback = await approve((await start(client, tenant, integration))["authorize_url"])
    assert (await client.get(callback)).status_code == 200
    replayed = await client.get(callback)
    assert replayed.status_code == 400 and replayed.json()["error"] == "AuthorizationNotPending"


async def test_an_admin_entered_client_is_used_when_the_server_registers_none(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    async with OAuthProtectedMcp(registration=False) as servers:
        integration = await create(client, tenant, servers.mcp_url)
        refused = await client.post(f"/v1/mcp-integrations/{integration['id']}/oauth/authorize", headers=tenant.admin)
        assert refused.status_code == 502 and "client_id:client_secret" in refused.json()["detail"]

        credentials = f"{servers.client_id}:{servers.client_secret}"
        changed = await client.patch(
            f"/v1/mcp-integrations/{integration['id']}", json={"credentials": credentials}, headers=tenant.admin
        )
        assert changed.status_code == 200, changed.text
        assert servers.client_secret not in changed.text
        started = await start(client, tenant, integration)
        servers.register(started["redirect_uri"])
        assert f"client_id={servers.client_id}" in started["authorize_url"]
        assert (await client.get(await approve(started["authorize_url"]))).status_code == 200
        assert (await tools(client, tenant, integration)).status_code == 200


async def test_client_credentials_need_no_admin_in_the_loop(client: httpx.AsyncClient, tenant: Tenant) -> None:
    async with OAuthProtectedMcp(registration=False) as servers:
        servers.register()
        credentials = f"{servers.client_id}:{servers.client_secret}"
        integration = await create(
            client, tenant, servers.mcp_url, auth_type="client_credentials", credentials=credentials
        )
        listed = await tools(client, tenant, integration)
        assert listed.status_code == 200, listed.text
        assert servers.provider.grants["client_credentials"] == 1

        wrong = await create(
            client, tenant, servers.mcp_url, name="Wrong", auth_type="client_credentials", credentials="x:wrong"
        )
        refused = await tools(client, tenant, wrong)
        assert refused.status_code == 502 and refused.json()["error"] == "McpAuthFailed"


async def test_only_the_organizations_admins_start_or_complete_it(
    client: httpx.AsyncClient, tenant: Tenant, make_tenant: MakeTenant, servers: OAuthProtectedMcp
) -> None:
    integration = await create(client, tenant, servers.mcp_url)
    other = await make_tenant("Other")
    member = await member_headers(client, tenant)
    path = f"/v1/mcp-integrations/{integration['id']}/oauth/authorize"
    assert (await client.post(path, headers=other.admin)).status_code == 404
    assert (await client.post(path, headers=member)).status_code == 403

    callback = await approve((await start(client, tenant, integration))["authorize_url"])
    assert (await client.get(callback, headers=other.admin)).status_code == 404
    assert (await client.get(callback, headers=member)).status_code == 403
    assert (await client.get(callback, headers=tenant.admin)).status_code == 200  # the state was not used up


async def test_bearer_integrations_cannot_be_authorized(client: httpx.AsyncClient, tenant: Tenant) -> None:
    body = {"name": "Plain", "url": "http://127.0.0.1:9/mcp", "auth_type": "none"}
    created = (await client.post("/v1/mcp-integrations", json=body, headers=tenant.admin)).json()
    refused = await client.post(f"/v1/mcp-integrations/{created['id']}/oauth/authorize", headers=tenant.admin)
    assert refused.status_code == 409 and refused.json()["error"] == "NotAnOAuthIntegration"


async def test_a_token_about_to_expire_is_refreshed_before_it_is_sent(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    async with OAuthProtectedMcp(expires_in=30) as servers:  # within the minute before expiry from the start
        integration = await create(client, tenant, servers.mcp_url)
        assert (await authorize(client, tenant, integration)).status_code == 200
        listed = await tools(client, tenant, integration)
        assert listed.status_code == 200, listed.text
        assert servers.provider.grants["refresh_token"] >= 1
        assert servers.refused == 0


async def test_rotating_the_secret_key_re_encrypts_the_grants(
    client: httpx.AsyncClient, tenant: Tenant, servers: OAuthProtectedMcp, container: Container
) -> None:
    integration = await create(client, tenant, servers.mcp_url)
    assert (await authorize(client, tenant, integration)).status_code == 200
    new_key = Fernet.generate_key().decode()
    rotated = await RotateCredentialEncryption(
        as_port(container.uow()), FernetSecretBox([new_key, "test secret key"]), container.oauth_grants()
    ).execute()
    assert rotated >= 1
    grant = await container.oauth_grants().get(OrgId(UUID(tenant.id)), IntegrationId(UUID(integration["id"])))
    assert grant is not None and grant.tokens is not None and grant.registration is not None
    only_new = FernetSecretBox([new_key])
    assert "access_token" in only_new.open(grant.tokens) and only_new.open(grant.registration)
