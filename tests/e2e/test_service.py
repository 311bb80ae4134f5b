import httpx

from tests.conftest import Tenant


async def test_health_and_readiness(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}


async def test_openapi_documents_the_api(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    for path in ("/v1/agents", "/v1/threads/{thread_id}/messages", "/v1/api-keys", "/v1/me", "/v1/tools"):
        assert path in spec["paths"]
    assert (await client.get("/docs")).status_code == 200


async def test_openapi_offers_the_api_key_as_a_bearer_scheme(client: httpx.AsyncClient) -> None:
    """What gives /docs its Authorize button: routes that need a key say so, the health routes do not."""
    spec = (await client.get("/openapi.json")).json()
    assert spec["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"
    assert spec["paths"]["/v1/agents"]["post"]["security"] == [{"ApiKey": []}]
    assert "security" not in spec["paths"]["/readyz"]["get"]


async def test_openapi_documents_the_503_of_routes_that_use_the_database(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    unavailable = spec["paths"]["/v1/agents"]["post"]["responses"]["503"]
    assert "Retry-After" in unavailable["headers"]
    assert unavailable["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    assert "503" not in spec["paths"]["/healthz"]["get"]["responses"]


async def test_tool_catalog_lists_native_tools_with_schemas(client: httpx.AsyncClient, tenant: Tenant) -> None:
    tools = (await client.get("/v1/tools", headers=tenant.admin)).json()
    by_type = {t["type"]: t for t in tools}
    assert {"source_query", "website_content", "send_email", "command"} <= set(by_type)
    assert by_type["source_query"]["parameters"]["required"] == ["query"]
    assert by_type["send_email"]["displayable"] is True
    assert not {"mcp_tool", "client", "agent"} & set(by_type)


async def test_unknown_routes_and_methods_use_the_error_shape(client: httpx.AsyncClient, tenant: Tenant) -> None:
    missing = await client.get("/v1/nothing", headers=tenant.admin)
    assert missing.status_code == 404 and missing.json()["error"] == "NotFound"
    wrong = await client.put("/v1/agents", headers=tenant.admin)
    assert wrong.status_code == 405 and wrong.json()["error"] == "MethodNotAllowed"
