"""The embeddings port on OpenAI's embeddings endpoint (or any server that speaks it)."""

from collections.abc import Sequence

from openai import APIConnectionError, APIError, APIStatusError, APITimeoutError, AsyncOpenAI, OpenAIError

from application.errors import EmbeddingsUnavailable
from infrastructure.llm.openai_model import attempts_of, provider_detail

MAX_INPUT_CHARS = 8_000 * 3
"""A text longer than this is cut before it is embedded (embeddings models take about 8k tokens)."""


class OpenAiEmbeddings:
    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        timeout_seconds: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        self._model, self._api_key = model, api_key
        self._client = AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout_seconds, max_retries=max_retries)

    @property
    def model(self) -> str:
        return self._model

    async def aclose(self) -> None:
        await self._client.close()

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        inputs = [text[:MAX_INPUT_CHARS] or " " for text in texts]
        try:
            answer = await self._client.embeddings.create(model=self._model, input=inputs, encoding_format="float")
        except APIStatusError as error:
            detail = f"{error.status_code} {attempts_of(error.response.request)}: {provider_detail(error)}"
            raise EmbeddingsUnavailable(f"embeddings model {self._model!r} returned {self._redact(detail)}") from None
        except APITimeoutError as error:
            raise EmbeddingsUnavailable(
                f"embeddings model {self._model!r} did not answer in time {attempts_of(error.request)}"
            ) from None
        except APIConnectionError as error:
            url = error.request.url
            raise EmbeddingsUnavailable(
                f"could not reach the embeddings model at {url.scheme}://{url.netloc.decode()}"
                f" {attempts_of(error.request)}"
            ) from None
        except (APIError, OpenAIError) as error:
            raise EmbeddingsUnavailable(f"embeddings call failed: {self._redact(str(error))}") from None
        ordered = sorted(answer.data, key=lambda item: item.index)
        if len(ordered) != len(inputs) or any(not item.embedding for item in ordered):
            raise EmbeddingsUnavailable(f"the embeddings model answered {len(ordered)} vectors for {len(inputs)} texts")
        return [list(item.embedding) for item in ordered]

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "[redacted]")
