"""LLM providers by model string `PROVIDER/MODEL`: openai (any compatible server), anthropic, litellm, replay."""

from kbench.llm.base import (
    GenParams,
    Message,
    Provider,
    Request,
    get_provider,
    provider_names,
    register_provider,
)
from kbench.llm.cache import ResponseCache, cache_key
from kbench.llm.client import LLMClient
from kbench.llm.pricing import Usage, cost_usd, price

__all__ = [
    "GenParams",
    "LLMClient",
    "Message",
    "Provider",
    "Request",
    "ResponseCache",
    "Usage",
    "cache_key",
    "cost_usd",
    "get_provider",
    "price",
    "provider_names",
    "register_provider",
]
