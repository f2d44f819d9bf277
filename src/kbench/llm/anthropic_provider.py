"""`anthropic/MODEL`: the official anthropic SDK (messages API), retries by the SDK's own backoff."""

from __future__ import annotations

import inspect
from typing import Any

from kbench.errors import ConfigError, require
from kbench.llm.base import GenParams, Request, api_key, register_provider
from kbench.llm.failures import describe_failure
from kbench.llm.tooluse import (
    Exchange,
    ToolSpec,
    ToolTurn,
    anthropic_messages,
    anthropic_tools,
    anthropic_turn,
)
from kbench.types import Completion

# Extended-thinking budgets for --reasoning-effort; the API's minimum budget is 1,024 tokens.
THINKING_BUDGET = {"low": 2048, "medium": 8192, "high": 16384}
# The SDK refuses non-streaming calls it expects to run past 10 minutes (~21k output tokens); stream
# well before that.
STREAM_ABOVE_TOKENS = 16384


class AnthropicProvider:
    name = "anthropic"
    cacheable = True
    errors_are_final = False

    def __init__(self, model: str, params: GenParams) -> None:
        self.sdk = require("anthropic", "llm")
        self.model = model
        self.params = params
        self.client = self.sdk.AsyncAnthropic(
            api_key=api_key("ANTHROPIC_API_KEY", params),
            base_url=params.base_url,
            max_retries=params.max_retries,
            timeout=params.timeout_s,
        )
        self._accepted = set(inspect.signature(self.client.messages.create).parameters)

    def _body(self, request: Request) -> dict[str, Any]:
        p = request.params
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": p.max_tokens,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        if request.system:
            body["system"] = request.system
        # SDK releases differ: newer ones take `output_config.effort` and no `temperature`, older ones
        # take `temperature` and manual `thinking` budgets. Send what this SDK accepts.
        accepted = self._accepted
        if p.reasoning_effort and "output_config" in accepted:
            body["output_config"] = {"effort": p.reasoning_effort}
        elif p.reasoning_effort:
            body["thinking"] = self._thinking(p)  # thinking needs the default temperature
        elif "temperature" in accepted:
            body["temperature"] = p.temperature
        if p.top_p is not None and "top_p" in accepted and "thinking" not in body:
            body["top_p"] = p.top_p
        return body

    @staticmethod
    def _thinking(p: GenParams) -> dict[str, Any]:
        if p.reasoning_effort not in THINKING_BUDGET:
            raise ConfigError(
                f"reasoning effort {p.reasoning_effort!r} unknown for anthropic; use {', '.join(THINKING_BUDGET)}"
            )
        budget = THINKING_BUDGET[p.reasoning_effort]
        if p.max_tokens <= budget:
            raise ConfigError(
                f"--max-tokens must exceed the thinking budget {budget} of '{p.reasoning_effort}'"
            )
        return {"type": "enabled", "budget_tokens": budget}

    async def complete(self, request: Request) -> Completion:
        message = await self._message(request, self._body(request))
        if isinstance(message, str):
            return Completion(model=request.model, text="", error=message)
        text = "".join(block.text for block in message.content if getattr(block, "type", "") == "text")
        usage = message.usage
        return Completion(
            model=request.model, text=text, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens
        )

    async def converse(self, request: Request, exchanges: list[Exchange], tools: list[ToolSpec]) -> ToolTurn:
        """One answer of a tool-using conversation (not cached: an agent's session resumes from its
        transcript); streamed where a long answer needs it, as `complete` is."""
        body = self._body(request) | {
            "messages": anthropic_messages(exchanges),
            "tools": anthropic_tools(tools),
        }
        message = await self._message(request, body)
        if isinstance(message, str):
            return ToolTurn(error=message)
        text, calls = anthropic_turn(message)
        usage = message.usage
        return ToolTurn(text, calls, usage.input_tokens, usage.output_tokens, message.stop_reason or "")

    async def _message(self, request: Request, body: dict[str, Any]) -> Any:
        """The SDK's Message for `body`, streamed where the answer may be long; a server that refuses the
        key or the model raises ConfigError; any other failure after the SDK's retries is its one-line
        reason (llm/failures.py), as a str."""
        sdk = self.sdk
        try:
            if request.params.stream or request.params.max_tokens > STREAM_ABOVE_TOKENS:
                async with self.client.messages.stream(**body) as stream:
                    return await stream.get_final_message()
            return await self.client.messages.create(**body)
        except (sdk.AuthenticationError, sdk.PermissionDeniedError, sdk.NotFoundError) as exc:
            raise ConfigError(
                f"{request.model}: the server refused the request ({exc}); check key and model"
            ) from exc
        except (sdk.APIError, ValueError, AttributeError, TypeError, KeyError) as exc:
            return describe_failure(exc, self.params.max_retries, self.params.base_url)

    async def aclose(self) -> None:
        await self.client.close()


@register_provider("anthropic")
def _make(model: str, params: GenParams) -> AnthropicProvider:
    return AnthropicProvider(model, params)
