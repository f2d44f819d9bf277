"""The provider contract and registry: a model string `PROVIDER/MODEL` names a provider and its model.

A provider turns one Request (a conversation plus sampling parameters) into one Completion. Retries on
429/5xx/timeouts happen inside the provider, through the SDK's own retry machinery; concurrency, caching
and accounting live in llm/client.py, so every provider gets them the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kbench.errors import ConfigError
from kbench.types import Completion


@dataclass(frozen=True)
class Message:
    role: str  # "user" | "assistant"
    content: str


@dataclass(frozen=True)
class GenParams:
    """Sampling parameters and connection settings; what `cache_fields` returns is part of the cache key."""

    temperature: float = 0.0
    top_p: float | None = None  # None: not sent (the server's default)
    max_tokens: int = 8192
    reasoning_effort: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    # Reasoning models can think for minutes before the first token; 600 s is the SDKs' own default.
    timeout_s: float = 600.0
    # The SDKs back off 0.5 s, 1 s, 2 s ... up to 8 s (or what retry-after says); 8 tries ride out ~30 s
    # of rate limiting, which is what a 16-way run against a shared endpoint sees.
    max_retries: int = 8
    stream: bool = False  # stream the answer (SSE); long generations then never sit idle on a proxy

    def cache_fields(self) -> dict[str, object]:
        fields: dict[str, object] = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "reasoning_effort": self.reasoning_effort,
            "base_url": self.base_url,
        }
        if self.top_p is not None:  # absent when unset, so entries cached before top_p existed still match
            fields["top_p"] = self.top_p
        return fields


@dataclass(frozen=True)
class Request:
    """One call: the conversation so far and where it belongs (problem, sample, turn)."""

    model: str  # the full `PROVIDER/MODEL` string
    system: str
    messages: tuple[Message, ...]
    params: GenParams = field(default_factory=GenParams)
    problem_key: str = ""
    level: int = 0
    number: int = 0
    sample: int = 0
    turn: int = 0


class Provider(Protocol):
    """Answers requests. `errors_are_final`: an error completion will not change when asked again."""

    name: str
    cacheable: bool
    errors_are_final: bool

    async def complete(self, request: Request) -> Completion: ...

    async def aclose(self) -> None: ...


ProviderFactory = Callable[[str, GenParams], Provider]
_REGISTRY: dict[str, ProviderFactory] = {}


def register_provider(name: str) -> Callable[[ProviderFactory], ProviderFactory]:
    def deco(factory: ProviderFactory) -> ProviderFactory:
        _REGISTRY[name] = factory
        return factory

    return deco


def provider_names() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)


def split_model(model: str) -> tuple[str, str]:
    provider, sep, name = model.partition("/")
    if not sep or not provider or not name:
        raise ConfigError(
            f"model {model!r} must be PROVIDER/MODEL (providers: {', '.join(provider_names())}), "
            "e.g. openai/gpt-4o or replay/path/to/folder"
        )
    return provider, name


def get_provider(model: str, params: GenParams | None = None) -> Provider:
    """Build the provider a model string names; unknown providers list the known ones."""
    _load_builtins()
    provider, name = split_model(model)
    if provider not in _REGISTRY:
        raise ConfigError(
            f"unknown LLM provider {provider!r} in {model!r}; known: {', '.join(provider_names())}"
        )
    return _REGISTRY[provider](name, params or GenParams())


def api_key(default_env: str, params: GenParams) -> str:
    """The API key from the environment variable `--api-key-env` names, else the provider's default."""
    env = params.api_key_env or default_env
    key = os.environ.get(env, "")
    if not key:
        raise ConfigError(
            f"no API key: set the environment variable {env} (or name another with --api-key-env)"
        )
    return key


def _load_builtins() -> None:
    # Importing a provider module registers it; the SDKs themselves are imported only when used.
    from kbench.llm import anthropic_provider, litellm_provider, openai_provider, replay  # noqa: F401
