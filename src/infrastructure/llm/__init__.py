"""Language model adapters: OpenAI Chat Completions, the offline model, and the router between them."""

from infrastructure.llm.offline_model import OFFLINE_MODEL, OfflineLanguageModel
from infrastructure.llm.openai_model import OpenAiLanguageModel
from infrastructure.llm.router import ModelRouter, language_model

__all__ = ["OFFLINE_MODEL", "ModelRouter", "OfflineLanguageModel", "OpenAiLanguageModel", "language_model"]
