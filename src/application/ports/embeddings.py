"""The embeddings port: texts turned into vectors by an embeddings model, for ranking passages by meaning."""

from collections.abc import Sequence
from typing import Protocol


class Embeddings(Protocol):
    @property
    def model(self) -> str:
        """The embeddings model: vectors of different models are never compared."""
        ...

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """One vector per text, in order. Raises EmbeddingsUnavailable when the model cannot answer."""
        ...
