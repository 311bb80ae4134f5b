"""The `internet_search` tool over a SearxNG instance the operator runs (its JSON API must be enabled:
`search: formats: [html, json]` in SearxNG's settings.yml)."""

from collections.abc import Sequence
from typing import Any

import httpx

from application.errors import ToolFailure
from application.ports.native_tools import SearchHit


class SearxngWebSearch:
    """Not behind the outbound guard: the search URL is the operator's own setting (often a private address),
    and neither tenants nor models choose where its requests go; the pages it finds are read through the guard."""

    def __init__(self, base_url: str | None, *, timeout_seconds: float = 15) -> None:
        self._endpoint = None if not base_url else base_url.rstrip("/").removesuffix("/search") + "/search"
        self._timeout_seconds = timeout_seconds

    @property
    def available(self) -> bool:
        return self._endpoint is not None

    async def search(self, query: str, *, limit: int = 5) -> Sequence[SearchHit]:
        if self._endpoint is None:
            raise ToolFailure("internet search is not configured on this server")
        if not query.strip():
            raise ToolFailure("the search query is empty")
        try:
            async with httpx.AsyncClient(timeout=self._timeout_seconds) as client:
                response = await client.get(
                    self._endpoint,
                    params={"q": query.strip(), "format": "json"},
                    headers={"Accept": "application/json"},
                )
        except httpx.TimeoutException:
            raise ToolFailure(f"the search service did not answer within {self._timeout_seconds:g} seconds") from None
        except httpx.HTTPError as error:
            raise ToolFailure(f"the search service cannot be reached: {error or type(error).__name__}") from None
        if response.status_code == 403:
            raise ToolFailure("the search service refused the request (is its JSON format enabled?)")
        if response.status_code >= 400:
            raise ToolFailure(f"the search service answered HTTP {response.status_code}")
        try:
            payload: Any = response.json()
        except ValueError:
            raise ToolFailure("the search service did not answer with JSON") from None
        results = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(results, list):
            raise ToolFailure("the search service's answer holds no result list")
        hits: list[SearchHit] = []
        for item in results:
            if len(hits) >= max(limit, 1):
                break
            url = item.get("url") if isinstance(item, dict) else None
            if isinstance(url, str) and url:
                title, snippet = item.get("title"), item.get("content")
                hits.append(
                    SearchHit(
                        title=title.strip() if isinstance(title, str) and title.strip() else url,
                        url=url,
                        snippet=snippet.strip() if isinstance(snippet, str) else "",
                    )
                )
        return hits
