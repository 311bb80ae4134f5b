"""The console's files as served: GET only, a strict Content-Security-Policy, nothing from another host."""

import re

import httpx
from starlette.routing import Route

from infrastructure.console.router import ASSETS, STATIC, router


async def test_the_console_page_is_served_with_a_strict_content_security_policy(client: httpx.AsyncClient) -> None:
    for path in ("/console", "/console/"):
        response = await client.get(path)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")
        policy = response.headers["content-security-policy"]
        assert "default-src 'self'" in policy
        assert "script-src 'self'" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert "frame-ancestors 'none'" in policy
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "set-cookie" not in response.headers


async def test_assets_have_their_types_and_the_same_policy(client: httpx.AsyncClient) -> None:
    script = await client.get("/console/assets/app.js")
    style = await client.get("/console/assets/console.css")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")
    assert "default-src 'self'" in script.headers["content-security-policy"]


async def test_only_the_console_files_can_be_fetched(client: httpx.AsyncClient) -> None:
    for path in ("/console/assets/nope.js", "/console/assets/../router.py", "/console/assets/%2e%2e/router.py"):
        response = await client.get(path)
        assert response.status_code == 404, path
        assert response.json()["error"] == "NotFound"
    assert (await client.post("/console", json={})).status_code == 405
    assert (await client.post("/console/assets/app.js", json={})).status_code == 405


def test_pages_load_nothing_from_another_host_and_have_no_inline_script() -> None:
    assert "index.html" in ASSETS and "app.js" in ASSETS
    for name, path in ASSETS.items():
        text = path.read_text()
        assert not re.search(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", text), name
        assert "@import url(" not in text, name
        assert "innerHTML" not in text, f"{name} builds HTML from strings"
    index = (STATIC / "index.html").read_text()
    assert all("src=" in tag for tag in re.findall(r"<script[^>]*>", index)), "inline script in index.html"
    assert "style=" not in index


def test_the_console_adds_no_endpoint_beside_its_files() -> None:
    # Its routes only read files: everything else the page does goes through the REST API's authorization.
    console_routes = router.routes
    assert console_routes
    for route in console_routes:
        assert isinstance(route, Route) and route.methods is not None, route
        assert route.methods <= {"GET", "HEAD"}, route.path
    paths = {r.path for r in console_routes if isinstance(r, Route)}  # all of them (checked above)
    assert paths == {"/console", "/console/", "/console/assets/{name:path}"}
