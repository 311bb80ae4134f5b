"""Picks the language model adapter that serves a request's model."""

from application.errors import ModelNotConfigured
from application.ports.llm import LanguageModel, ModelRequest, ModelResponse, TextListener
from infrastructure.llm.offline_model import OFFLINE_MODEL, OfflineLanguageModel
from infrastructure.llm.openai_model import OpenAiLanguageModel


class ModelRouter:
    """`threadline-offline` goes to the offline model; every other model to OpenAI, when configured."""

    def __init__(self, *, openai: LanguageModel | None = None, offline: LanguageModel | None = None) -> None:
        self._openai = openai
        self._offline = offline if offline is not None else OfflineLanguageModel()

    async def complete(self, request: ModelRequest, on_text: TextListener | None = None) -> ModelResponse:
        if request.model == OFFLINE_MODEL:
            return await self._offline.complete(request, on_text)
        if self._openai is None:
            raise ModelNotConfigured(
                f"model {request.model!r} needs an OpenAI API key: set THREADLINE_OPENAI_API_KEY,"
                f" or give the agent the model {OFFLINE_MODEL!r}"
            )
        return await self._openai.complete(request, on_text)

    async def aclose(self) -> None:
        if isinstance(self._openai, OpenAiLanguageModel):
            await self._openai.aclose()


def language_model(
    *,
    openai_api_key: str | None,
    openai_base_url: str | None = None,
    timeout_seconds: float = 60.0,
    max_retries: int = 2,
) -> ModelRouter:
    """The router as the settings describe it: OpenAI only when an API key is set."""
    openai = (
        OpenAiLanguageModel(
            api_key=openai_api_key,
            base_url=openai_base_url or None,
            timeout_seconds=timeout_seconds,
            max_retries=max_retries,
        )
        if openai_api_key
        else None
    )
    return ModelRouter(openai=openai)
