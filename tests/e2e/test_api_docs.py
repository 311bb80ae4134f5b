"""What a user trying the API from /docs sees: every error a route answers, with the body it really has,
the documentation pages working without any other host, and 405s that say which methods are allowed."""

import re
from typing import Any

import httpx
import pytest

from tests.conftest import Tenant

ERROR_BODY = {"$ref": "#/components/schemas/ErrorBody"}


@pytest.fixture(scope="module")
async def spec(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in spec["paths"].items()
        for method, operation in item.items()
        if path.startswith("/v1/") and path.split("/")[2] not in ("models", "chat", "responses")
    ]


def _names(response: dict[str, Any]) -> set[str]:
    return set(response["content"]["application/json"]["examples"])


async def test_every_error_response_has_the_error_body_and_names_its_errors(spec: dict[str, Any]) -> None:
    for path, method, operation in _operations(spec):
        for status, response in operation["responses"].items():
            if int(status) < 400:
                continue
            assert response["content"]["application/json"]["schema"] == ERROR_BODY, (path, method, status)
            for name, example in response["content"]["application/json"]["examples"].items():
                assert example["value"]["error"] == name
                assert f"`{name}`" in response["description"]


async def test_fastapis_validation_error_schema_is_replaced_by_the_error_body(spec: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    create = spec["paths"]["/v1/agents"]["post"]["responses"]
    assert {"ValidationError", "InvalidReference", "InvalidValue"} <= _names(create["422"])
    assert {"InvalidJson"} <= _names(create["400"]) and {"RequestTooLarge"} == _names(create["413"])


async def test_each_route_lists_the_statuses_of_what_can_go_wrong(spec: dict[str, Any]) -> None:
    def statuses(path: str, method: str) -> set[str]:
        return {status for status in spec["paths"][path][method]["responses"] if int(status) >= 400}

    # 429: a key's requests per minute (THREADLINE_KEY_REQUESTS_PER_MINUTE)
    assert statuses("/v1/me", "get") == {"401", "429", "503"}
    assert statuses("/v1/agents", "get") == {"400", "401", "422", "429", "503"}  # cursor, key, limit, database
    assert statuses("/v1/api-keys", "post") == {"400", "401", "403", "409", "413", "422", "429", "503"}
    assert statuses("/v1/mcp-integrations/{integration_id}/tools", "get") >= {"404", "409", "502", "504"}
    assert "AgentNotFound" in _names(spec["paths"]["/v1/agents/{agent_id}"]["get"]["responses"]["404"])
    assert {"ThreadBusy", "IdempotencyKeyReused"} <= _names(
        spec["paths"]["/v1/threads/{thread_id}/runs"]["post"]["responses"]["409"]
    )
    assert "Retry-After" in spec["paths"]["/v1/threads"]["get"]["responses"]["503"]["headers"]
    assert "Retry-After" in spec["paths"]["/v1/threads/{thread_id}/runs"]["post"]["responses"]["429"]["headers"]
    assert _names(spec["paths"]["/readyz"]["get"]["responses"]["503"]) == {"NotReady"}
    assert statuses("/healthz", "get") == set()


async def test_a_documented_error_is_the_one_answered(client: httpx.AsyncClient, spec: dict[str, Any]) -> None:
    response = await client.get("/v1/me")
    assert response.status_code == 401
    assert response.json()["error"] in _names(spec["paths"]["/v1/me"]["get"]["responses"]["401"])


async def test_docs_pages_load_their_assets_from_this_service_only(client: httpx.AsyncClient) -> None:
    for page in ("/docs", "/redoc"):
        answer = await client.get(page)
        # What the bundles might fetch from elsewhere (ReDoc's logo) the browser refuses.
        assert "default-src 'self'" in answer.headers["content-security-policy"]
        assert "img-src 'self' data: blob:" in answer.headers["content-security-policy"]
        html = answer.text
        assert "://" not in html, page  # no CDN, no fonts from elsewhere: the page names no other host
        assets = re.findall(r"""(?:src|href)=["']([^"']+)["']|url: ?["']([^"']+)["']""", html)
        urls = [found for pair in assets for found in pair if found]
        assert urls and all(url.startswith("/") for url in urls), (page, urls)
        for url in urls:
            response = await client.get(url)
            assert response.status_code == 200, url
            assert len(response.content) > 100, url


async def test_swagger_ui_offers_authorize_with_a_bearer_key(spec: dict[str, Any]) -> None:
    assert spec["components"]["securitySchemes"]["ApiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key of the organization: `Authorization: Bearer <key>`",
    }
    assert all(operation.get("security") == [{"ApiKey": []}] for _, _, operation in _operations(spec))


async def test_405_names_every_method_the_path_allows(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.put("/v1/agents", headers=tenant.admin)
    assert response.status_code == 405 and response.json()["error"] == "MethodNotAllowed"
    assert response.headers["allow"] == "GET, POST"
    one = await client.post("/v1/agents/00000000-0000-0000-0000-000000000000", headers=tenant.admin)
    assert one.status_code == 405 and one.headers["allow"] == "DELETE, GET, PATCH"


async def test_every_schema_and_field_says_what_it_is(spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]
    undescribed = [name for name, schema in schemas.items() if not schema.get("description")]
    fields = [
        f"{name}.{field}"
        for name, schema in schemas.items()
        for field, value in (schema.get("properties") or {}).items()
        if not value.get("description")
    ]
    assert undescribed == [], "schemas without a description (a docstring on the model or enum gives one)"
    assert fields == [], "fields without a description (an attribute docstring or Field(description=...))"
