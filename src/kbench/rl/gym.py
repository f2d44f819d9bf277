"""kbench's RL environment as a `gymnasium.Env` (the `rl` extra), registered as `kbench/Kernel-v0`.

    import gymnasium
    env = gymnasium.make("kbench.rl.gym:kbench/Kernel-v0", problems=["2/1", "2/2"],
                         config={"device": "cpu"}, max_turns=3)
    prompt, info = env.reset(seed=0)              # a seeded draw of the problem; info: problem, sample, system
    feedback, reward, terminated, truncated, info = env.step(completion)
    env.close()                                   # closes the Evaluator the env made (not one passed in)

Observations are the user turns (the prompt, then each turn's feedback) and actions the model's
completions, both text (`AnyText`: any characters, up to `MAX_TEXT`). Each episode is one sample of the
Evaluator's run and each step one turn (rl/env.py), so `kbench report` shows an RL session like any run.
The spec is `nondeterministic`: a verdict's timing (and so a speed reward) varies from run to run, and
each episode files a new sample. `render_mode="ansi"` renders the last turn as text.

Pass `evaluator=` to share one Evaluator between envs (a vector of envs, a trainer's rollouts), else
`config=` (a RunConfig or its fields) and `model=` make one for the env alone.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import gymnasium
from gymnasium import spaces

from kbench.api import Evaluator
from kbench.config import RunConfig
from kbench.errors import ConfigError
from kbench.rl.env import EnvOptions, KernelEnv
from kbench.rl.reward import Reward
from kbench.types import Problem

ENV_ID = "kbench/Kernel-v0"
MAX_TEXT = 200_000  # characters of a completion or a feedback turn


class AnyText(spaces.Text):
    """A Text space of any characters: prompts, feedback and code are not alphanumeric, and not even
    ASCII (a prompt may say "≤"). Sampling draws printable ASCII."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | None = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=string.printable, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"


class GymKernelEnv(gymnasium.Env[str, str]):
    """An episode picks a problem (`reset(options={"problem": ...})`, else a draw from `problems` with the
    env's seeded generator); each step judges one completion (see the module doc)."""

    metadata: dict[str, Any] = {"render_modes": ["ansi"]}

    def __init__(
        self,
        evaluator: Evaluator | None = None,
        problems: Sequence[str | Problem] = (),
        reward: Reward | str = "speedup",
        options: EnvOptions | None = None,
        *,
        config: RunConfig | dict[str, Any] | None = None,
        model: str | None = None,
        max_turns: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        if not problems:
            raise ConfigError("GymKernelEnv needs at least one problem (problems=[...])")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode {render_mode!r}: only 'ansi' (the last turn as text)")
        if evaluator is not None and config is not None:
            raise ConfigError("pass an evaluator or a config, not both")
        self._owned: Evaluator | None = None
        if evaluator is None:
            cfg = config if isinstance(config, RunConfig) else RunConfig(**(config or {}))
            overrides: dict[str, Any] = {"model": model} if model is not None else {}
            evaluator = self._owned = Evaluator(cfg, None, **overrides)
        if max_turns is not None:
            options = replace(options or EnvOptions(), max_turns=max_turns)
        self.env = KernelEnv(evaluator, reward, options)
        self.problems = list(problems)
        self.render_mode = render_mode
        self.observation_space = AnyText(MAX_TEXT, min_length=1)
        self.action_space = AnyText(MAX_TEXT)
        self._last = ""

    @property
    def evaluator(self) -> Evaluator:
        return self.env.evaluator

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        problem = (options or {}).get("problem")
        if problem is None:
            problem = self.problems[int(self.np_random.integers(len(self.problems)))]
        observation = self.env.reset(problem)
        assert self.env.problem is not None and self.env.prompt is not None
        self._last = observation
        info = {"problem": self.env.problem.key, "sample": self.env.sample, "system": self.env.prompt.system}
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        result = self.env.step(action)
        verdict = result.verdict
        self._last = result.feedback
        info = {"verdict": verdict, "status": verdict.status.value, "rule": verdict.rule, "turn": result.turn}
        return result.feedback, result.reward, result.terminated, result.truncated, info

    def render(self) -> str | None:  # type: ignore[override]
        return self._last if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Closes the Evaluator this env made; one passed in belongs to the caller."""
        if self._owned is not None:
            self._owned.close()
            self._owned = None
        super().close()


def register() -> None:
    """Register `kbench/Kernel-v0` with gymnasium (done on import; again is a no-op)."""
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(ENV_ID, entry_point=f"{__name__}:GymKernelEnv", nondeterministic=True)


register()
