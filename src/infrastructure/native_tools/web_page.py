"""The `website_content` tool: fetch one http(s) page through the outbound guard and return its text."""

import asyncio
import codecs
import re

import httpx

from application.errors import ToolFailure, UrlNotAllowed
from application.ports.native_tools import WebPage
from infrastructure.native_tools.html_text import html_to_text
from infrastructure.outbound.guard import NetworkPolicy
from infrastructure.outbound.transport import guarded_httpx_transport

MAX_REDIRECTS = 5
_HTML = frozenset({"text/html", "application/xhtml+xml"})
_TEXT = frozenset({"application/json", "application/xml", "application/javascript", "application/x-javascript"})
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_HEADERS = {
    "User-Agent": "Threadline/0.1 (website_content tool)",
    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.1",
}


class HttpWebPageReader:
    def __init__(
        self,
        outbound: NetworkPolicy,
        *,
        timeout_seconds: float = 15,
        max_bytes: int = 2_000_000,
        max_chars: int = 50_000,
    ) -> None:
        self._outbound = outbound
        self._timeout_seconds = timeout_seconds
        self._max_bytes = max_bytes
        self._max_chars = max_chars
        # certifi's certificate authorities, none named by the environment (as before, with trust_env=False).
        self._ssl_context = httpx.create_ssl_context(trust_env=False)

    async def read(self, url: str) -> WebPage:
        current = url
        try:
            async with asyncio.timeout(self._timeout_seconds), self._client() as client:
                for _ in range(MAX_REDIRECTS + 1):
                    # Every hop is checked here (a public page may redirect to an internal address), and
                    # again by the transport on the addresses it connects to (the name may answer otherwise).
                    await self._outbound.check_url(current)
                    async with client.stream("GET", current) as response:
                        if response.is_redirect:
                            current = str(response.url.join(response.headers["location"]))
                            continue
                        return await self._page(response, current)
                raise ToolFailure(f"{url} redirects more than {MAX_REDIRECTS} times")
        except UrlNotAllowed as error:
            where = "" if current == url else f" (redirected to {current})"
            raise ToolFailure(f"cannot fetch {url}{where}: {error.detail}") from None
        except (TimeoutError, httpx.TimeoutException):
            raise ToolFailure(f"{current} did not answer within {self._timeout_seconds:g} seconds") from None
        except httpx.ConnectError as error:
            raise ToolFailure(f"cannot connect to {current}: {error or 'connection failed'}") from None
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as error:
            raise ToolFailure(f"cannot fetch {current}: {error or type(error).__name__}") from None

    def _client(self) -> httpx.AsyncClient:
        # trust_env=False: no proxy from the environment (it would resolve names the guard did not
        # check) and no .netrc credentials sent to whatever host a model names.
        return httpx.AsyncClient(
            transport=guarded_httpx_transport(self._outbound, ssl_context=self._ssl_context),
            follow_redirects=False,
            timeout=self._timeout_seconds,
            trust_env=False,
            headers=_HEADERS,
        )

    async def _page(self, response: httpx.Response, url: str) -> WebPage:
        if response.status_code >= 400:
            raise ToolFailure(f"{url} answered HTTP {response.status_code} {response.reason_phrase}".rstrip())
        if response.status_code >= 300:
            raise ToolFailure(f"{url} answered HTTP {response.status_code} without a page")
        mime = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if mime and not _is_text(mime):
            raise ToolFailure(f"{url} is {mime}, not a text page; website_content reads HTML, plain text, JSON and XML")
        body, cut = await self._body(response)
        if not mime and b"\x00" in body[:4096]:
            raise ToolFailure(f"{url} sent binary content without a content type; it is not a text page")
        markup = mime in _HTML or (not mime and body.lstrip()[:15].lower().startswith((b"<!doctype", b"<html")))
        text = body.decode(_encoding(response, body, markup), errors="replace")
        title = None
        if markup:
            readable = await asyncio.to_thread(html_to_text, text)
            title, text = readable.title, readable.text
        notes = []
        if cut:
            notes.append(f"[the page is larger than {self._max_bytes} bytes; only its beginning was read]")
        if len(text) > self._max_chars:
            notes.append(f"[text shortened to the first {self._max_chars} of {len(text)} characters]")
            text = text[: self._max_chars]
        return WebPage(url=url, title=title, text="\n\n".join([text, *notes]) if notes else text)

    async def _body(self, response: httpx.Response) -> tuple[bytes, bool]:
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > self._max_bytes:
                return bytes(body[: self._max_bytes]), True
        return bytes(body), False


def _is_text(mime: str) -> bool:
    return mime.startswith("text/") or mime in _HTML or mime in _TEXT or mime.endswith(("+xml", "+json"))


def _encoding(response: httpx.Response, body: bytes, markup: bool) -> str:
    declared = response.charset_encoding
    if declared is None and markup and (found := _META_CHARSET.search(body[:4096])):
        declared = found.group(1).decode("ascii")
    try:
        return codecs.lookup(declared).name if declared else "utf-8"
    except LookupError:
        return "utf-8"
