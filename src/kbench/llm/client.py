"""What every provider gets: a concurrency limit, the response cache, latency, cost and usage.

The limit covers the whole call including the SDK's retries and backoff sleeps, so at most `concurrency`
requests are ever in flight against the server, however many 429s come back. `in_flight` and `queued`
count the calls inside and waiting for the limit (a run's progress line shows them).

The cache is keyed by model, conversation, sampling parameters and sample index (llm/cache.py): sample
i of a prompt is its own request and its own entry, so several samples are never one answer, and a
re-run with the same settings gets each sample's own earlier answer back (counted in `usage.cached`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

from kbench.llm.base import GenParams, Provider, Request, get_provider
from kbench.llm.cache import ResponseCache
from kbench.llm.pricing import Usage, cost_usd
from kbench.llm.tooluse import Exchange, ToolSpec, ToolTurn
from kbench.types import Completion


class LLMClient:
    def __init__(self, provider: Provider, concurrency: int = 8, cache: ResponseCache | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.provider = provider
        self.cache = cache if provider.cacheable else None
        self.concurrency = concurrency
        self.usage = Usage()
        self.in_flight = 0  # calls inside the limit (sent, retrying or backing off)
        self.queued = 0  # calls waiting for the limit
        self._sem: asyncio.Semaphore | None = None

    @classmethod
    def create(
        cls, model: str, params: GenParams, concurrency: int = 8, cache_dir: Path | None = None
    ) -> LLMClient:
        cache = ResponseCache(cache_dir / "llm") if cache_dir is not None else None
        return cls(get_provider(model, params), concurrency, cache)

    @property
    def errors_are_final(self) -> bool:
        return self.provider.errors_are_final

    @property
    def uses_tools(self) -> bool:
        """Whether the provider can hold a tool-using conversation (`converse`)."""
        return callable(getattr(self.provider, "converse", None))

    async def converse(self, request: Request, exchanges: list[Exchange], tools: list[ToolSpec]) -> ToolTurn:
        """One answer of a tool-using conversation, inside the concurrency limit, with latency and cost;
        counted in `usage` as a request. Never cached (an agent's transcript is its record)."""
        async with self._slot():
            start = time.perf_counter()
            turn: ToolTurn = await self.provider.converse(request, exchanges, tools)  # type: ignore[attr-defined]
        cost = cost_usd(request.model, turn.input_tokens, turn.output_tokens)
        turn = replace(turn, latency_s=time.perf_counter() - start, cost_usd=cost)
        self.usage.add(
            Completion(
                request.model, turn.text, 0, 0, turn.input_tokens, turn.output_tokens, cost, error=turn.error
            )
        )
        return turn

    async def complete(self, request: Request) -> Completion:
        if self.cache is not None:
            hit = self.cache.get(request)
            if hit is not None:
                self.usage.add(hit)
                return hit
        async with self._slot():
            start = time.perf_counter()
            completion = await self.provider.complete(request)
        latency = time.perf_counter() - start
        completion = replace(
            completion,
            sample=request.sample,
            turn=request.turn,
            latency_s=latency,
            cost_usd=cost_usd(request.model, completion.input_tokens, completion.output_tokens),
        )
        if self.cache is not None:
            self.cache.put(request, completion)
        self.usage.add(completion)
        return completion

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """Inside the concurrency limit: counted in `queued` while waiting for it, in `in_flight` inside."""
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        self.queued += 1
        try:
            await self._sem.acquire()
        finally:
            self.queued -= 1
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            self._sem.release()

    async def aclose(self) -> None:
        await self.provider.aclose()
