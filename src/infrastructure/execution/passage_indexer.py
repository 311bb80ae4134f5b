"""Embeds new passages in the background, in every process that serves or works (their takes never overlap):
when a passage was added since the last look, and every `retry_seconds` for the passages whose embedding failed
or whose process stopped holding them."""

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from application.errors import EmbeddingsUnavailable
from application.retrieval import EmbedPassages

logger = logging.getLogger(__name__)

MAX_PAUSE_SECONDS = 60.0


class PassageIndexer:
    def __init__(
        self, embed: Callable[[], EmbedPassages] | None, *, poll_seconds: float = 1.0, retry_seconds: float = 30.0
    ) -> None:
        self._embed, self._poll, self._retry = embed, poll_seconds, retry_seconds
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._embed is not None and self._task is None:
            self._task = asyncio.create_task(self._loop(self._embed), name="passage indexer")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self, embed: Callable[[], EmbedPassages]) -> None:
        seen, looked_at, failures = -1, 0.0, 0
        while True:
            try:
                use_case = embed()
                newest = await use_case.newest_passage()
                if newest != seen or time.monotonic() - looked_at >= self._retry:
                    looked_at = time.monotonic()
                    while await use_case.execute():
                        pass
                    seen, failures = newest, 0
            except EmbeddingsUnavailable:
                failures += 1  # the use case logged it; its passages are retried after their pause
            except Exception:
                failures += 1
                logger.exception("embedding passages failed")
            await asyncio.sleep(min(self._poll * 2**failures, max(self._retry, self._poll), MAX_PAUSE_SECONDS))
