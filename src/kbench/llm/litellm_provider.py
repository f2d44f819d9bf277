"""`litellm/MODEL`: any provider litellm knows (Bedrock, Vertex, Azure ...), when `kbench[litellm]` is installed.

litellm reads its own provider keys from the environment; retries are its `num_retries` backoff.
"""

from __future__ import annotations

from typing import Any

from kbench.errors import require
from kbench.llm.base import GenParams, Request, register_provider
from kbench.llm.failures import describe_failure
from kbench.types import Completion


class LiteLLMProvider:
    name = "litellm"
    cacheable = True
    errors_are_final = False

    def __init__(self, model: str, params: GenParams) -> None:
        self.litellm = require("litellm", "litellm")
        self.model = model

    async def complete(self, request: Request) -> Completion:
        p = request.params
        messages = [{"role": "system", "content": request.system}] if request.system else []
        messages += [{"role": m.role, "content": m.content} for m in request.messages]
        kwargs: dict[str, Any] = {"temperature": p.temperature, "max_tokens": p.max_tokens}
        if p.top_p is not None:
            kwargs["top_p"] = p.top_p
        if p.reasoning_effort:
            kwargs["reasoning_effort"] = p.reasoning_effort
        if p.base_url:
            kwargs["api_base"] = p.base_url
        try:
            resp = await self.litellm.acompletion(
                model=self.model, messages=messages, num_retries=p.max_retries, timeout=p.timeout_s, **kwargs
            )
        except Exception as exc:  # noqa: BLE001 - litellm wraps every provider's own exception types
            error = describe_failure(exc, p.max_retries, p.base_url)
            return Completion(model=request.model, text="", error=error)
        usage = getattr(resp, "usage", None)
        return Completion(
            model=request.model,
            text=resp.choices[0].message.content or "",
            input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            output_tokens=getattr(usage, "completion_tokens", 0) or 0,
        )

    async def aclose(self) -> None:
        return None


@register_provider("litellm")
def _make(model: str, params: GenParams) -> LiteLLMProvider:
    return LiteLLMProvider(model, params)
