"""Fetches a file to upload as a source from an http(s) URL, through the outbound guard."""

import asyncio
from urllib.parse import unquote, urlsplit

import httpx

from application.errors import SourceTooLarge, UnreadableSource
from application.ports.documents import FetchedFile
from infrastructure.outbound.guard import NetworkPolicy
from infrastructure.outbound.transport import guarded_httpx_transport

MAX_REDIRECTS = 5
_HEADERS = {"User-Agent": "Threadline/0.1 (source upload)"}


class HttpFileFetcher:
    def __init__(self, outbound: NetworkPolicy, *, timeout_seconds: float = 30) -> None:
        self._outbound = outbound
        self._timeout_seconds = timeout_seconds
        self._ssl_context = httpx.create_ssl_context(trust_env=False)

    async def fetch(self, url: str, *, max_bytes: int) -> FetchedFile:
        current = url
        try:
            async with asyncio.timeout(self._timeout_seconds), self._client() as client:
                for _ in range(MAX_REDIRECTS + 1):
                    # Every hop is checked (a public URL may redirect inside), and the transport checks
                    # the addresses it connects to again.
                    await self._outbound.check_url(current)
                    async with client.stream("GET", current) as response:
                        if response.is_redirect:
                            if "location" not in response.headers:
                                raise UnreadableSource(f"{current} redirects (HTTP {response.status_code}) nowhere")
                            current = str(response.url.join(response.headers["location"]))
                            continue
                        return await self._file(response, current, max_bytes)
                raise UnreadableSource(f"{url} redirects more than {MAX_REDIRECTS} times")
        except (TimeoutError, httpx.TimeoutException):
            raise UnreadableSource(f"{current} did not answer within {self._timeout_seconds:g} seconds") from None
        except httpx.ConnectError as error:
            raise UnreadableSource(f"cannot connect to {current}: {error or 'connection failed'}") from None
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise UnreadableSource(f"cannot fetch {current}: {error or type(error).__name__}") from None

    def _client(self) -> httpx.AsyncClient:
        # trust_env=False: no proxy from the environment (it would resolve names the guard did not check).
        return httpx.AsyncClient(
            transport=guarded_httpx_transport(self._outbound, ssl_context=self._ssl_context),
            follow_redirects=False,
            timeout=self._timeout_seconds,
            trust_env=False,
            headers=_HEADERS,
        )

    @staticmethod
    async def _file(response: httpx.Response, url: str, max_bytes: int) -> FetchedFile:
        if response.status_code >= 300:
            raise UnreadableSource(f"{url} answered HTTP {response.status_code} {response.reason_phrase}".rstrip())
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise SourceTooLarge(f"{url} is {declared} bytes; sources are limited to {max_bytes} bytes")
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > max_bytes:
                raise SourceTooLarge(f"{url} is larger than {max_bytes} bytes, the limit for sources")
        path = unquote(urlsplit(url).path).rstrip("/")
        name = path.rsplit("/", 1)[-1] or urlsplit(url).hostname or url
        return FetchedFile(url=url, name=name, mime_type=response.headers.get("content-type"), content=bytes(body))
