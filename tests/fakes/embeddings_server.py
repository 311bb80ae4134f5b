"""A deterministic embeddings server speaking OpenAI's `/embeddings`, over real HTTP on 127.0.0.1.

Its vectors are hashed features of the text: each word's stem and the character trigrams of each word, so texts
sharing words, or parts of words ("hosepipe" and "hoses"), are close; no two runs differ. It stands in for an
embeddings model in tests and in `bench/retrieval.py` (no model can be downloaded here).

    async with FakeEmbeddings() as fake:
        model = OpenAiEmbeddings(model=fake.model, api_key="sk-test", base_url=fake.base_url)
        fake.failing = True     # answers 503 until set back
"""

import hashlib
import math
import re
from types import TracebackType
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.loopback import LoopbackServer

DIMENSIONS = 1024
_WORDS = re.compile(r"\w+", re.UNICODE)
_SUFFIXES = ("ing", "ed", "es", "s")
_STOP_WORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "in", "is", "it", "of", "on",
        "or", "the", "to", "was", "were", "what", "where", "which", "who", "will", "with",
    }
)  # fmt: skip


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _bucket(feature: str) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
    number = int.from_bytes(digest, "little")
    return number % DIMENSIONS, 1.0 if number >> 63 else -1.0


def embedding(text: str) -> list[float]:
    vector = [0.0] * DIMENSIONS
    for word in _WORDS.findall(text.lower()):
        if word in _STOP_WORDS:
            continue
        stem = _stem(word)
        features = [f"w:{stem}"] + [f"t:{g}" for g in _trigrams(stem)]
        weight = 1.0 / math.sqrt(len(features))
        for feature in features:
            index, sign = _bucket(feature)
            vector[index] += sign * (2.0 if feature.startswith("w:") else 1.0) * weight
    if not any(vector):
        vector[0] = 1.0
    return vector


def _trigrams(word: str) -> list[str]:
    padded = f"<{word}>"
    return [padded[i : i + 3] for i in range(len(padded) - 2)]


class FakeEmbeddings:
    model = "fake-embeddings-1024"

    def __init__(self) -> None:
        self.failing = False
        self.texts: list[str] = []
        """Every text embedded, in order"""
        self._server = LoopbackServer(Starlette(routes=[Route("/v1/embeddings", self._embed, methods=["POST"])]))

    @property
    def base_url(self) -> str:
        return f"{self._server.base_url}/v1"

    async def __aenter__(self) -> "FakeEmbeddings":
        await self._server.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._server.__aexit__(exc_type, exc, tb)

    async def _embed(self, request: Request) -> JSONResponse:
        if self.failing:
            return JSONResponse({"error": {"message": "the embeddings model is overloaded"}}, status_code=503)
        body: dict[str, Any] = await request.json()
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.texts += inputs
        data = [{"object": "embedding", "index": i, "embedding": embedding(text)} for i, text in enumerate(inputs)]
        usage = {"prompt_tokens": sum(len(t) // 4 for t in inputs), "total_tokens": sum(len(t) // 4 for t in inputs)}
        return JSONResponse({"object": "list", "data": data, "model": body["model"], "usage": usage})
