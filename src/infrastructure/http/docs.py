"""/docs (Swagger UI) and /redoc with their scripts and styles served by this process, so they work offline.

The assets come from an installed package (fastapi-offline ships Swagger UI's and ReDoc's bundles); the
pages name no other host, and their Content-Security-Policy keeps the browser from fetching anything from one
(ReDoc's bundle would load its logo from its vendor's CDN).
"""

from importlib.resources import files

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/docs/assets"
ASSETS = files("fastapi_offline") / "static"
POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline'",  # each page starts its bundle with an inline script
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "worker-src 'self' blob:",
        "connect-src 'self'",
    )
)
"""Only this server: the pages work offline and tell no other host that someone reads them."""


def _page(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = POLICY
    return page


def install_docs(app: FastAPI) -> None:
    """The documentation pages of an app created with `docs_url=None, redoc_url=None`."""
    openapi_url = app.openapi_url or "/openapi.json"
    router = APIRouter(include_in_schema=False)

    @router.get("/docs")
    async def swagger_ui() -> HTMLResponse:
        return _page(
            get_swagger_ui_html(
                openapi_url=openapi_url,
                title=f"{app.title} - API",
                swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
                swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
                swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
                # No validator badge: Swagger UI would send the schema to a public validator to draw it.
                swagger_ui_parameters={"validatorUrl": None, "persistAuthorization": True},
            )
        )

    @router.get("/redoc")
    async def redoc() -> HTMLResponse:
        return _page(
            get_redoc_html(
                openapi_url=openapi_url,
                title=f"{app.title} - API",
                redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
                redoc_favicon_url=f"{ASSETS_PATH}/favicon.png",
                with_google_fonts=False,
            )
        )

    app.include_router(router)
    app.mount(ASSETS_PATH, StaticFiles(directory=str(ASSETS)), name="docs-assets")
