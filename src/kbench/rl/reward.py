"""Rewards: a verdict -> a float, pluggable by name (a registry) or as any `Callable[[Verdict], float]`.

The default, `speedup`:

    reward = 0                                                       if the verdict is not `ok`, or flagged
    reward = correct + weight * log(clip(speedup, min_speedup, max_speedup))          otherwise

`speedup` is the median time of the chosen baseline (`eager` by default, or `compile`) over the
candidate's; without a meaningful timing (`measure=False`, Triton's interpreter) the log term is 0. With
the defaults (1.0, 1.0, 0.5, 8.0) a correct kernel earns 0.31 to 3.08: a slow correct kernel still
earns more than a wrong one (the minimum must stay positive, which the constructor checks), and a
speedup beyond 8x earns no more, so a model gains nothing by chasing timing outliers.

Flagged (the evaluator raised a flag but the protocol did not reject): a static finding of warning
severity (`precision-downgrade`, `streams`, ...), or a speedup over eager above the evaluator's own
"suspicious" threshold (verdict.SUSPICIOUS_SPEEDUP, 100x). Statuses other than `ok` -- `mismatch`,
`no_code`, `cheat`, every error -- earn 0; and whatever reward is plugged in, the environment never pays
a `cheat` more than 0 (rl/env.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kbench.errors import ConfigError
from kbench.types import Severity, Status, Verdict

Reward = Callable[[Verdict], float]


def flagged(verdict: Verdict) -> bool:
    """Whether the evaluator flagged an `ok` verdict: a warning-level static finding or a suspicious speedup."""
    from kbench.evaluate.verdict import SUSPICIOUS_SPEEDUP  # imports torch: not when this module loads

    if any(f.severity is Severity.WARN for f in verdict.checks.findings):
        return True
    eager = verdict.speedup("eager")
    return eager is not None and eager > SUSPICIOUS_SPEEDUP


@dataclass(frozen=True)
class SpeedupReward:
    """The default reward (module docstring): a correctness term plus the clipped log speedup."""

    baseline: str = "eager"
    correct: float = 1.0
    weight: float = 1.0
    min_speedup: float = 0.5
    max_speedup: float = 8.0

    def __post_init__(self) -> None:
        if not 0 < self.min_speedup <= 1 <= self.max_speedup:
            raise ConfigError(
                f"need 0 < min_speedup <= 1 <= max_speedup, got {self.min_speedup}, {self.max_speedup}"
            )
        if self.correct + self.weight * math.log(self.min_speedup) <= 0:
            raise ConfigError(
                "a correct but slow kernel would earn no more than a wrong one: raise `correct` or "
                f"`min_speedup` (correct + weight * log(min_speedup) = "
                f"{self.correct + self.weight * math.log(self.min_speedup):.3f})"
            )

    def __call__(self, verdict: Verdict) -> float:
        if verdict.status is not Status.OK or flagged(verdict):
            return 0.0
        speedup = verdict.speedup(self.baseline)
        if speedup is None or verdict.timing is None or not verdict.timing.meaningful:
            return self.correct
        clipped = min(max(speedup, self.min_speedup), self.max_speedup)
        return self.correct + self.weight * math.log(clipped)


@dataclass(frozen=True)
class CorrectReward:
    """1 for an `ok` verdict the evaluator did not flag, else 0: correctness only."""

    def __call__(self, verdict: Verdict) -> float:
        return 1.0 if verdict.status is Status.OK and not flagged(verdict) else 0.0


_REGISTRY: dict[str, Callable[..., Reward]] = {"speedup": SpeedupReward, "correct": CorrectReward}


def register_reward(name: str) -> Callable[[Callable[..., Reward]], Callable[..., Reward]]:
    """Register a reward factory under `name` (get_reward(name, **options) builds it)."""

    def deco(factory: Callable[..., Reward]) -> Callable[..., Reward]:
        _REGISTRY[name] = factory
        return factory

    return deco


def get_reward(name: str, **options: Any) -> Reward:
    if name not in _REGISTRY:
        raise ConfigError(f"unknown reward {name!r}; choose one of: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name](**options)


def as_reward(reward: Reward | str) -> Reward:
    return get_reward(reward) if isinstance(reward, str) else reward
