"""`openai/MODEL`: the official openai SDK against OpenAI or any compatible server (`--base-url`).

vLLM, SGLang, Ollama, DeepSeek, Together, OpenRouter and Gemini's compatible endpoint all speak this wire
format. Retries on 429/5xx/timeouts are the SDK's (exponential backoff that honours retry-after).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from kbench.errors import ConfigError, require
from kbench.llm.base import GenParams, Request, api_key, register_provider
from kbench.llm.failures import describe_failure
from kbench.llm.tooluse import Exchange, ToolSpec, ToolTurn, openai_messages, openai_tools, openai_turn
from kbench.types import Completion

T = TypeVar("T")


class OpenAIProvider:
    name = "openai"
    cacheable = True
    errors_are_final = False

    def __init__(self, model: str, params: GenParams) -> None:
        self.sdk = require("openai", "llm")
        self.model = model
        self.params = params
        self.client = self.sdk.AsyncOpenAI(
            api_key=api_key("OPENAI_API_KEY", params),
            base_url=params.base_url,
            max_retries=params.max_retries,
            timeout=params.timeout_s,
        )

    def _body(self, request: Request) -> dict[str, Any]:
        p = request.params
        messages = [{"role": "system", "content": request.system}] if request.system else []
        messages += [{"role": m.role, "content": m.content} for m in request.messages]
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": p.temperature}
        if p.top_p is not None:
            body["top_p"] = p.top_p
        # OpenAI's own API wants max_completion_tokens (reasoning models reject max_tokens); compatible
        # servers such as Ollama know only max_tokens.
        body["max_completion_tokens" if p.base_url is None else "max_tokens"] = p.max_tokens
        if p.reasoning_effort:
            body["reasoning_effort"] = p.reasoning_effort
        return body

    async def complete(self, request: Request) -> Completion:
        answer = await self._guarded(request, self._text(request))
        if isinstance(answer, str):  # after the SDK's retries: an error, recorded and asked again on re-run
            return Completion(model=request.model, text="", error=answer)
        text, tin, tout = answer
        return Completion(model=request.model, text=text, input_tokens=tin, output_tokens=tout)

    async def converse(self, request: Request, exchanges: list[Exchange], tools: list[ToolSpec]) -> ToolTurn:
        """One answer of a tool-using conversation (never streamed, never cached: an agent's session is
        kept by its transcript, and resumes from it)."""
        body = self._body(request) | {
            "messages": openai_messages(request.system, exchanges),
            "tools": openai_tools(tools),
        }
        resp = await self._guarded(request, self.client.chat.completions.create(**body))
        if isinstance(resp, str):
            return ToolTurn(error=resp)
        if not resp.choices:
            return ToolTurn(error="the server answered no choices")
        text, calls = openai_turn(resp.choices[0].message)
        usage = resp.usage
        tin, tout = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
        return ToolTurn(text, calls, tin, tout, resp.choices[0].finish_reason or "")

    async def _text(self, request: Request) -> tuple[str, int, int]:
        if request.params.stream:
            return await self._stream(request)
        resp = await self.client.chat.completions.create(**self._body(request))
        text = (resp.choices[0].message.content or "") if resp.choices else ""
        usage = resp.usage
        return (text, usage.prompt_tokens, usage.completion_tokens) if usage else (text, 0, 0)

    async def _guarded(self, request: Request, work: Awaitable[T]) -> T | str:
        """What `work` answers; a server that refuses the key or the model raises ConfigError; any other
        failure after the SDK's retries is its one-line reason (llm/failures.py), as a str."""
        sdk = self.sdk
        try:
            return await work
        except (sdk.AuthenticationError, sdk.PermissionDeniedError, sdk.NotFoundError) as exc:
            raise ConfigError(
                f"{request.model}: the server refused the request ({exc}); check key and model"
            ) from exc
        except (sdk.APIError, ValueError, AttributeError, TypeError) as exc:
            return describe_failure(exc, self.params.max_retries, self.params.base_url)

    async def _stream(self, request: Request) -> tuple[str, int, int]:
        body = self._body(request) | {"stream": True, "stream_options": {"include_usage": True}}
        stream = await self.client.chat.completions.create(**body)
        parts: list[str] = []
        tin = tout = 0
        async for chunk in stream:
            if chunk.usage:
                tin, tout = chunk.usage.prompt_tokens, chunk.usage.completion_tokens
            for choice in chunk.choices or []:
                if choice.delta and choice.delta.content:
                    parts.append(choice.delta.content)
        return "".join(parts), tin, tout

    async def aclose(self) -> None:
        await self.client.close()


@register_provider("openai")
def _make(model: str, params: GenParams) -> OpenAIProvider:
    return OpenAIProvider(model, params)
