"""Uploaded sources: each kind of file becomes a source split into passages that keep their location,
searching finds the passage that answers, bad files are refused with an error that says why."""

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from dependency_injector import providers
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from application.use_cases.sources import UploadSource
from infrastructure.container import Container
from infrastructure.documents.fetcher import HttpFileFetcher
from infrastructure.documents.reader import FileDocumentReader
from infrastructure.http.body_limit import MULTIPART_ALLOWANCE, BodyLimitMiddleware
from infrastructure.outbound.guard import NetworkPolicy
from tests.conftest import MakeTenant, Tenant
from tests.fakes.loopback import LoopbackServer

pytestmark = pytest.mark.executors


def pdf(*pages: str) -> bytes:
    """A PDF with one page per text (Helvetica, one line per line of text), written by hand."""
    count = len(pages)
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids ["
        + b" ".join(b"%d 0 R" % (4 + 2 * n) for n in range(count))
        + b"] /Count %d >>" % count,
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }
    for n, text in enumerate(pages):
        escaped = [line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for line in text.split("\n")]
        stream = b"BT /F1 11 Tf 14 TL 72 740 Td " + b" ".join(b"(%s) '" % line.encode() for line in escaped) + b" ET"
        objects[4 + 2 * n] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            b"/Contents %d 0 R >>" % (5 + 2 * n)
        )
        objects[5 + 2 * n] = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)
    out = bytearray(b"%PDF-1.4\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (number, objects[number])
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offsets[number] for number in sorted(objects))
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


async def new_thread(client: httpx.AsyncClient, tenant: Tenant, agent_id: str | None = None) -> str:
    body = {"agent_id": agent_id} if agent_id else {}
    response = await client.post("/v1/threads", json=body, headers=tenant.admin)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.fixture
async def thread(client: httpx.AsyncClient, tenant: Tenant) -> str:
    return await new_thread(client, tenant)


async def upload(
    client: httpx.AsyncClient, tenant: Tenant, path: str, name: str, content: bytes, mime: str | None = None
) -> httpx.Response:
    files = {"file": (name, content, mime) if mime else (name, content)}
    return await client.post(path, files=files, headers=tenant.admin)


async def passages(client: httpx.AsyncClient, tenant: Tenant, source_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/sources/{source_id}/passages?limit=100", headers=tenant.admin)
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


async def search(client: httpx.AsyncClient, tenant: Tenant, thread: str, q: str, **params: str) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/threads/{thread}/sources/search", params={"q": q, **params}, headers=tenant.admin)
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


MARKDOWN = b"""# Garden handbook

Welcome to the community garden.

## Watering

Water the tomato beds every morning before nine. The hoses are in the blue shed.

## Compost

Kitchen scraps go in the left bin; the right bin is for leaves and straw only.
"""


async def test_a_markdown_file_is_split_by_its_headings(client: httpx.AsyncClient, tenant: Tenant, thread: str) -> None:
    response = await upload(client, tenant, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)
    assert response.status_code == 201, response.text
    uploaded = response.json()
    assert (uploaded["source"]["kind"], uploaded["source"]["mime_type"], uploaded["passages"]) == (
        "text",
        "text/markdown",
        3,
    )
    assert uploaded["source"]["origin"]["type"] == "upload" and uploaded["source"]["name"] == "garden.md"
    found = await passages(client, tenant, uploaded["source"]["id"])
    assert [(p["heading"], p["location"]) for p in found] == [
        ("Garden handbook", "Garden handbook"),
        ("Garden handbook > Watering", "Garden handbook > Watering"),
        ("Garden handbook > Compost", "Garden handbook > Compost"),
    ]
    [best, *_] = await search(client, tenant, thread, "where do the hoses live?")
    assert best["source_name"] == "garden.md" and best["passage"]["heading"] == "Garden handbook > Watering"
    assert "**hoses**" in best["snippet"]


async def test_plain_text_is_split_by_paragraphs(client: httpx.AsyncClient, tenant: Tenant, thread: str) -> None:
    text = (
        "\n\n".join(f"Paragraph {n}: " + "lorem ipsum dolor sit amet " * 20 for n in range(6))
        + "\n\nThe key is under the mat."
    )
    response = await upload(client, tenant, f"/v1/threads/{thread}/sources", "notes.txt", text.encode(), "text/plain")
    assert response.status_code == 201, response.text
    assert response.json()["passages"] > 3
    [best, *_] = await search(client, tenant, thread, "mat key")
    assert best["passage"]["text"].endswith("The key is under the mat.")


async def test_a_csv_file_is_a_table_and_its_rows_are_found(
    client: httpx.AsyncClient, tenant: Tenant, thread: str
) -> None:
    rows = "\n".join(f"P-{n},Widget {n},{n * 3}" for n in range(1, 26))
    content = f"sku,product,stock\n{rows}\nP-99,Periscope,7\n".encode()
    response = await upload(client, tenant, f"/v1/threads/{thread}/sources", "stock.csv", content, "text/csv")
    assert response.status_code == 201, response.text
    source = response.json()["source"]
    assert source["kind"] == "data" and response.json()["passages"] == 3
    table = (await client.get(f"/v1/sources/{source['id']}", headers=tenant.admin)).json()["data"]
    assert table["headers"] == ["sku", "product", "stock"] and table["rows"][-1] == ["P-99", "Periscope", "7"]
    [best, *_] = await search(client, tenant, thread, "periscope")
    assert best["passage"]["row"] == 21 and best["passage"]["location"] == "row 21"
    assert "sku: P-99; product: Periscope; stock: 7" in best["passage"]["text"]


async def test_an_html_page_keeps_its_main_text_only(client: httpx.AsyncClient, tenant: Tenant, thread: str) -> None:
    page = b"""<html><head><title>Opening hours</title><script>var tracking = "beacon";</script></head>
    <body><nav>Home | About</nav><main><h2>Weekdays</h2><p>The library opens at eight.</p>
    <h2>Weekends</h2><p>On Sundays the reading room stays closed.</p></main><footer>Copyright</footer></body></html>"""
    response = await upload(client, tenant, f"/v1/threads/{thread}/sources", "hours.html", page, "text/html")
    assert response.status_code == 201, response.text
    found = await passages(client, tenant, response.json()["source"]["id"])
    text = " ".join(p["text"] for p in found)
    assert "reading room" in text and "beacon" not in text and "About" not in text and "Copyright" not in text
    [best, *_] = await search(client, tenant, thread, "sunday")
    assert best["passage"]["heading"] == "Opening hours > Weekends"


async def test_a_pdf_is_read_page_by_page(client: httpx.AsyncClient, tenant: Tenant, thread: str) -> None:
    content = pdf("Chapter one\nThe lighthouse keeper rose early.", "Chapter two\nA storm broke the lantern glass.")
    response = await upload(client, tenant, f"/v1/threads/{thread}/sources", "story.pdf", content, "application/pdf")
    assert response.status_code == 201, response.text
    assert response.json()["source"]["mime_type"] == "application/pdf"
    found = await passages(client, tenant, response.json()["source"]["id"])
    assert [(p["page"], p["location"]) for p in found] == [(1, "page 1"), (2, "page 2")]
    assert "lighthouse keeper" in found[0]["text"]
    [best, *_] = await search(client, tenant, thread, "lantern storm")
    assert best["passage"]["page"] == 2


async def test_the_type_comes_from_the_name_when_the_part_does_not_say(
    client: httpx.AsyncClient, tenant: Tenant, thread: str
) -> None:
    content = pdf("Only page")
    response = await upload(
        client, tenant, f"/v1/threads/{thread}/sources", "scan.pdf", content, "application/octet-stream"
    )
    assert response.status_code == 201, response.text
    assert response.json()["source"]["mime_type"] == "application/pdf"


@pytest.mark.parametrize(
    ("name", "content", "mime", "status", "error", "says"),
    [
        ("photo.png", b"\x89PNG\r\n\x1a\n", "image/png", 415, "UnsupportedSourceType", "image/png"),
        ("blob", b"\x01\x02", "application/octet-stream", 415, "UnsupportedSourceType", "cannot tell"),
        ("broken.pdf", b"%PDF-1.4 this is not a PDF", "application/pdf", 422, "UnreadableSource", "not a readable PDF"),
        ("blank.pdf", pdf(""), "application/pdf", 422, "UnreadableSource", "no text layer"),
        ("latin.txt", "café".encode("latin-1"), "text/plain", 422, "UnreadableSource", "not UTF-8"),
        ("binary.txt", b"abc\x00def", "text/plain", 422, "UnreadableSource", "binary"),
        ("empty.md", b"", "text/markdown", 422, "UnreadableSource", "empty"),
        ("spaces.md", b"  \n\n ", "text/markdown", 422, "UnreadableSource", "no text"),
        ("empty.csv", b"\n\n", "text/csv", 422, "UnreadableSource", "no rows"),
    ],
)
async def test_a_file_that_cannot_be_a_source_is_refused_with_the_reason(
    client: httpx.AsyncClient,
    tenant: Tenant,
    thread: str,
    name: str,
    content: bytes,
    mime: str,
    status: int,
    error: str,
    says: str,
) -> None:
    response = await upload(client, tenant, f"/v1/threads/{thread}/sources", name, content, mime)
    assert (response.status_code, response.json()["error"]) == (status, error), response.text
    assert says in response.json()["detail"]
    listed = await client.get(f"/v1/threads/{thread}/sources", headers=tenant.admin)
    assert listed.json()["data"] == []


async def test_a_file_over_the_limit_is_413(
    client: httpx.AsyncClient, tenant: Tenant, thread: str, container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(container.settings(), "max_source_bytes", 1000)
    response = await upload(client, tenant, f"/v1/threads/{thread}/sources", "big.txt", b"x" * 1001, "text/plain")
    assert (response.status_code, response.json()["error"]) == (413, "SourceTooLarge"), response.text
    assert "1000 bytes" in response.json()["detail"]


async def test_the_same_file_twice_is_409_with_the_first_source(
    client: httpx.AsyncClient, tenant: Tenant, thread: str
) -> None:
    first = await upload(client, tenant, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)
    again = await upload(client, tenant, f"/v1/threads/{thread}/sources", "copy.md", MARKDOWN)
    assert (again.status_code, again.json()["error"]) == (409, "DuplicateSource")
    assert first.json()["source"]["id"] in again.json()["detail"]
    elsewhere = await upload(
        client, tenant, f"/v1/threads/{await new_thread(client, tenant)}/sources", "g.md", MARKDOWN
    )
    assert elsewhere.status_code == 201


async def test_a_file_or_a_url_is_needed_and_not_both(client: httpx.AsyncClient, tenant: Tenant, thread: str) -> None:
    neither = await client.post(f"/v1/threads/{thread}/sources", data={"name": "x"}, headers=tenant.admin)
    both = await client.post(
        f"/v1/threads/{thread}/sources",
        data={"url": "https://example.org/a.txt"},
        files={"file": ("a.txt", b"a")},
        headers=tenant.admin,
    )
    for response in (neither, both):
        assert (response.status_code, response.json()["error"]) == (422, "InvalidValue"), response.text


async def test_a_url_the_outbound_policy_refuses_is_not_fetched(
    client: httpx.AsyncClient, tenant: Tenant, thread: str
) -> None:
    response = await client.post(
        f"/v1/threads/{thread}/sources", data={"url": "http://127.0.0.1:9/notes.txt"}, headers=tenant.admin
    )
    assert (response.status_code, response.json()["error"]) == (422, "UrlNotAllowed"), response.text


async def test_an_agents_sources_are_searched_from_its_threads(client: httpx.AsyncClient, tenant: Tenant) -> None:
    agent = (await client.post("/v1/agents", json={"name": "Gardener"}, headers=tenant.admin)).json()
    response = await upload(client, tenant, f"/v1/agents/{agent['id']}/sources", "garden.md", MARKDOWN)
    assert response.status_code == 201, response.text
    assert response.json()["source"]["agent_id"] == agent["id"]
    thread = await new_thread(client, tenant, agent["id"])
    [best, *_] = await search(client, tenant, thread, "compost bin")
    assert best["passage"]["heading"] == "Garden handbook > Compost"
    assert await search(client, tenant, await new_thread(client, tenant), "compost bin") == []


async def test_a_search_may_keep_to_one_source(client: httpx.AsyncClient, tenant: Tenant, thread: str) -> None:
    first = (await upload(client, tenant, f"/v1/threads/{thread}/sources", "a.txt", b"red apples", "text/plain")).json()
    second = (
        await upload(client, tenant, f"/v1/threads/{thread}/sources", "b.txt", b"green apples", "text/plain")
    ).json()
    assert len(await search(client, tenant, thread, "apples")) == 2
    only = await search(client, tenant, thread, "apples", source_id=second["source"]["id"])
    assert [h["source_id"] for h in only] == [second["source"]["id"]]
    assert first["source"]["id"] != second["source"]["id"]


@pytest.mark.parametrize(
    "query", ['"unbalanced', "NEAR(a b", "apples AND OR NOT", "col:apples", "-apples", "*", "apples) OR (", "'; --"]
)
async def test_any_text_is_a_query(client: httpx.AsyncClient, tenant: Tenant, thread: str, query: str) -> None:
    await upload(client, tenant, f"/v1/threads/{thread}/sources", "a.txt", b"red apples and NEAR pears", "text/plain")
    response = await client.get(f"/v1/threads/{thread}/sources/search", params={"q": query}, headers=tenant.admin)
    assert response.status_code == 200, response.text


async def test_a_deleted_source_is_no_longer_found(client: httpx.AsyncClient, tenant: Tenant, thread: str) -> None:
    uploaded = (await upload(client, tenant, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)).json()
    source_id = uploaded["source"]["id"]
    assert (await client.delete(f"/v1/sources/{source_id}", headers=tenant.admin)).status_code == 204
    assert await search(client, tenant, thread, "compost") == []
    assert (await client.get(f"/v1/sources/{source_id}", headers=tenant.admin)).status_code == 404
    assert (await client.delete(f"/v1/sources/{source_id}", headers=tenant.admin)).status_code == 404
    again = await upload(client, tenant, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)
    assert again.status_code == 201


async def test_a_source_can_be_indexed_again(client: httpx.AsyncClient, tenant: Tenant, thread: str) -> None:
    uploaded = (await upload(client, tenant, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)).json()
    response = await client.post(f"/v1/sources/{uploaded['source']['id']}/reindex", headers=tenant.admin)
    assert response.status_code == 200, response.text
    assert response.json()["passages"] == 3
    assert len(await search(client, tenant, thread, "compost")) == 1


async def test_imported_mcp_resources_are_searchable_too(
    client: httpx.AsyncClient, tenant: Tenant, thread: str, mcp_server: Any
) -> None:
    integration = (
        await client.post("/v1/mcp-integrations", json={"name": "Memo", "url": mcp_server.url}, headers=tenant.admin)
    ).json()
    imported = await client.post(
        f"/v1/mcp-integrations/{integration['id']}/resources/read",
        json={"uri": "memo://people.csv", "import": True, "thread_id": thread},
        headers=tenant.admin,
    )
    assert imported.status_code == 200, imported.text
    [best] = await search(client, tenant, thread, "Grace")
    assert best["source_name"] == "People" and best["passage"]["text"].endswith("name: Grace; city: Arlington")


async def test_another_organization_cannot_upload_search_or_read_passages(
    client: httpx.AsyncClient, make_tenant: MakeTenant
) -> None:
    owner, intruder = await make_tenant("Owner"), await make_tenant("Intruder")
    thread = await new_thread(client, owner)
    agent = (await client.post("/v1/agents", json={"name": "Private"}, headers=owner.admin)).json()
    uploaded = (await upload(client, owner, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)).json()
    source_id = uploaded["source"]["id"]
    for path in (f"/v1/threads/{thread}/sources", f"/v1/agents/{agent['id']}/sources"):
        response = await upload(client, intruder, path, "x.md", b"# injected")
        assert (response.status_code, response.json()["error"]) == (404, path.split("/")[2][:-1].title() + "NotFound")
    for method, path in (
        ("GET", f"/v1/sources/{source_id}/passages"),
        ("GET", f"/v1/threads/{thread}/sources/search?q=compost"),
        ("POST", f"/v1/sources/{source_id}/reindex"),
        ("DELETE", f"/v1/sources/{source_id}"),
    ):
        response = await client.request(method, path, headers=intruder.admin)
        assert response.status_code == 404, (method, path, response.text)
    assert len(await search(client, owner, thread, "compost")) == 1
    intruder_thread = await new_thread(client, intruder)
    assert await search(client, intruder, intruder_thread, "compost") == []


async def test_a_long_question_finds_the_passage_holding_most_of_its_words(
    client: httpx.AsyncClient, tenant: Tenant, thread: str
) -> None:
    await upload(client, tenant, f"/v1/threads/{thread}/sources", "garden.md", MARKDOWN)
    question = "Which bin do kitchen scraps go in, and where do leaves and straw go?"
    for limit in ("1", "10"):
        [best, *_] = await search(client, tenant, thread, question, limit=limit)
        assert best["passage"]["heading"] == "Garden handbook > Compost"


async def test_a_file_the_source_limit_allows_is_not_refused_by_the_request_limit() -> None:
    async def received(request: Request) -> PlainTextResponse:
        return PlainTextResponse(str(len(await request.body())))

    inner = Starlette(routes=[Route("/v1/threads/{thread_id}/sources", received, methods=["POST"])])
    inner.add_route("/v1/threads", received, methods=["POST"])
    app = BodyLimitMiddleware(inner, max_bytes=1024, max_source_bytes=4096)  # requests smaller than sources
    form = {"file": ("notes.txt", b"x" * 4096, "text/plain")}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://threadline.test") as http:
        uploaded = await http.post("/v1/threads/t1/sources", files=form)
        elsewhere = await http.post("/v1/threads", content=b"x" * 4096)
        oversized = await http.post("/v1/threads/t1/sources", content=b"x" * (4096 + MULTIPART_ALLOWANCE + 1))
    assert uploaded.status_code == 200 and int(uploaded.text) > 4096  # the file and its form
    assert (elsewhere.status_code, elsewhere.json()["error"]) == (413, "RequestTooLarge")
    assert "1024 bytes" in elsewhere.json()["detail"]
    assert oversized.status_code == 413 and f"{4096 + MULTIPART_ALLOWANCE} bytes" in oversized.json()["detail"]


@pytest.fixture
async def loopback_uploads(container: Container) -> AsyncIterator[None]:
    """Source uploads from URLs may fetch from 127.0.0.1 (the deployment's policy would be
    THREADLINE_WEB_ALLOWED_NETWORKS=127.0.0.0/8)."""
    fetcher = HttpFileFetcher(NetworkPolicy(["127.0.0.0/8"]), timeout_seconds=10)
    settings = container.settings()
    container.upload_source.override(
        providers.Factory(
            UploadSource,
            uow=container.uow,
            clock=container.clock,
            ids=container.ids,
            reader=providers.Object(FileDocumentReader()),
            fetcher=providers.Object(fetcher),
            max_source_bytes=settings.max_source_bytes,
        )
    )
    try:
        yield
    finally:
        container.upload_source.reset_override()


async def test_a_source_is_uploaded_from_a_url_the_policy_allows(
    client: httpx.AsyncClient, tenant: Tenant, thread: str, loopback_uploads: None
) -> None:
    async def handbook(request: Request) -> Response:
        return Response(MARKDOWN, media_type="text/markdown")

    async with LoopbackServer(Starlette(routes=[Route("/docs/garden.md", handbook)])) as site:
        url = f"{site.base_url}/docs/garden.md"
        response = await client.post(f"/v1/threads/{thread}/sources", data={"url": url}, headers=tenant.admin)
    assert response.status_code == 201, response.text
    uploaded = response.json()
    assert (uploaded["source"]["name"], uploaded["source"]["mime_type"], uploaded["passages"]) == (
        "garden.md",
        "text/markdown",
        3,
    )
    assert uploaded["source"]["origin"]["type"] == "web" and uploaded["source"]["origin"]["uri"] == url
    [best, *_] = await search(client, tenant, thread, "tomato beds")
    assert best["passage"]["heading"] == "Garden handbook > Watering"
