"""Token prices and the usage a run accumulates (requests, cache hits, errors, tokens, cost).

Prices are USD per million tokens (input, output), list prices as published by the vendors in 2025;
a model is priced by the longest matching prefix of its name. Unknown models cost 0 and are listed as
unpriced, so a report never shows a made-up number.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbench.types import Completion

PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "o1": (15.00, 60.00),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "deepseek-chat": (0.27, 1.10),
    "deepseek-reasoner": (0.55, 2.19),
}


def price(model: str) -> tuple[float, float] | None:
    """(input, output) USD per million tokens for `PROVIDER/MODEL` or `MODEL`, or None when unknown."""
    name = model.split("/", 1)[-1].split("/")[-1]
    hits = [p for p in PRICES_PER_MTOK if name.startswith(p)]
    return PRICES_PER_MTOK[max(hits, key=len)] if hits else None


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float:
    rates = price(model)
    if rates is None:
        return 0.0
    return (input_tokens * rates[0] + output_tokens * rates[1]) / 1e6


@dataclass
class Usage:
    requests: int = 0  # answered by the provider (cache hits excluded)
    cached: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: set[str] = field(default_factory=set)

    def add(self, c: Completion) -> None:
        if c.cached:
            self.cached += 1
            return
        self.requests += 1
        self.errors += bool(c.error)
        self.input_tokens += c.input_tokens
        self.output_tokens += c.output_tokens
        self.cost_usd += c.cost_usd
        if price(c.model) is None and not c.error and c.input_tokens:
            self.unpriced.add(c.model)

    def summary(self) -> str:
        line = (
            f"{self.requests} requests ({self.cached} cached, {self.errors} failed), "
            f"{self.input_tokens:,} input + {self.output_tokens:,} output tokens, ${self.cost_usd:.4f}"
        )
        if self.unpriced:
            line += f" (no price known for {', '.join(sorted(self.unpriced))})"
        return line
