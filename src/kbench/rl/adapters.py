"""Thin adapters to the conventions RL code uses today: a Gymnasium-style env and a GRPO reward function.

`GymKernelEnv` has Gymnasium's methods and return values (`reset(seed=, options=) -> (obs, info)`,
`step(action) -> (obs, reward, terminated, truncated, info)`) without needing gymnasium; where gymnasium
is installed its `observation_space` and `action_space` are `spaces.Text`.

`grpo_reward(evaluator)` is a reward function as TRL's GRPOTrainer calls one: keyword arguments
`prompts` and `completions` (strings, or lists of chat messages in the conversational format) plus every
other column of the dataset, one value per completion; it returns one float per completion. The dataset
needs a column naming each prompt's problem (`problem` by default, e.g. "2/1"). The whole batch is
judged at once (builds in parallel), each completion filed as a new sample of the Evaluator's run; an
item that gets no verdict (an unknown problem, a job that failed) earns 0, its reason logged, and never
fails the batch.
"""

from __future__ import annotations

import logging
import random
import string
from collections.abc import Callable, Sequence
from typing import Any

from kbench.api import Evaluator, Submission, Ticket
from kbench.errors import ConfigError, KbenchError
from kbench.rl.env import EnvOptions, KernelEnv
from kbench.rl.reward import Reward, as_reward
from kbench.types import Problem, Status, Verdict

log = logging.getLogger(__name__)

MAX_TEXT = 200_000  # characters of a completion or a feedback turn, for the Text spaces


def _text_spaces(max_length: int) -> tuple[Any, Any]:
    """(observation_space, action_space) as gymnasium Text spaces, or (None, None) without gymnasium."""
    try:
        from gymnasium import spaces
    except ImportError:
        return None, None
    charset = string.printable  # code and prose; Text spaces only describe, nothing here checks them
    return (
        spaces.Text(max_length, min_length=1, charset=charset),
        spaces.Text(max_length, min_length=0, charset=charset),
    )


class GymKernelEnv:
    """A Gymnasium-style env: each episode picks a problem (`options={"problem": ...}`, else a seeded
    draw from `problems`), observations are prompt and feedback texts, actions are completions."""

    metadata: dict[str, Any] = {"render_modes": []}
    render_mode = None

    def __init__(
        self,
        evaluator: Evaluator,
        problems: Sequence[str | Problem],
        reward: Reward | str = "speedup",
        options: EnvOptions | None = None,
    ) -> None:
        if not problems:
            raise ConfigError("GymKernelEnv needs at least one problem")
        self.env = KernelEnv(evaluator, reward, options)
        self.problems = list(problems)
        self.observation_space, self.action_space = _text_spaces(MAX_TEXT)
        self._rng = random.Random()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        if seed is not None:
            self._rng.seed(seed)
        problem = (options or {}).get("problem") or self._rng.choice(self.problems)
        observation = self.env.reset(problem)
        assert self.env.problem is not None and self.env.prompt is not None
        info = {"problem": self.env.problem.key, "sample": self.env.sample, "system": self.env.prompt.system}
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        result = self.env.step(action)
        verdict = result.verdict
        info = {"verdict": verdict, "status": verdict.status.value, "rule": verdict.rule, "turn": result.turn}
        return result.feedback, result.reward, result.terminated, result.truncated, info

    def close(self) -> None:
        """Nothing to release: the Evaluator belongs to the caller."""


def completion_text(completion: Any) -> str:
    """A GRPO completion as text: a string, or the content of the last message of a conversational one."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    if isinstance(completion, list) and completion:
        return completion_text(completion[-1])
    return ""


def evaluate_texts(
    evaluator: Evaluator,
    problems: Sequence[str],
    texts: Sequence[str],
    backend: str | None,
    model: str | None,
) -> list[Verdict | str]:
    """Verdicts for completions of these problems, in order, as one batch; no code is a filed `no_code`.
    An item that cannot be judged (an unknown problem, a job that failed) is the reason, as a string: it
    never takes the batch's other items down."""
    from kbench.extract import extract

    out: list[Verdict | str] = []
    tickets: list[tuple[int, Ticket]] = []
    for i, (address, text) in enumerate(zip(problems, texts, strict=True)):
        found = extract(text)
        try:
            # A trainer's dataset names problems of the evaluator's source, never a file (it runs trusted).
            sub = Submission(
                evaluator.problem(address, strict=True), found.source or "", backend, model=model,
                completion=text,
            )  # fmt: skip
            if sub.source:
                tickets.append((i, evaluator.submit(sub)))
                out.append("")
            else:
                out.append(evaluator.record_no_code(sub, found.reason))
        except KbenchError as exc:
            out.append(f"{address}: {exc}")
    for i, ticket in tickets:
        try:
            out[i] = ticket.verdict()
        except Exception as exc:  # the job failed (the evaluator's side): this item has no verdict
            out[i] = f"{problems[i]}: the evaluation failed ({type(exc).__name__}: {exc})"
    return out


def grpo_reward(
    evaluator: Evaluator,
    reward: Reward | str = "speedup",
    *,
    problem_column: str = "problem",
    backend: str | None = None,
    model: str | None = None,
) -> Callable[..., list[float]]:
    """A reward function for TRL's GRPOTrainer (`reward_funcs=[grpo_reward(evaluator)]`); see the module
    docstring. A cheat earns at most 0, whichever reward is plugged in."""
    score = as_reward(reward)

    def kbench_reward(prompts: Any = None, completions: Any = None, **kwargs: Any) -> list[float]:
        if completions is None:
            raise ConfigError("the reward function needs `completions` (GRPOTrainer passes them)")
        problems = kwargs.get(problem_column)
        if problems is None:
            raise ConfigError(
                f"the dataset has no {problem_column!r} column: add one naming each prompt's problem "
                "(e.g. '2/1'), or pass problem_column="
            )
        texts = [completion_text(c) for c in completions]
        rewards = []
        for v in evaluate_texts(evaluator, list(problems), texts, backend, model):
            if isinstance(v, str):  # no verdict for this item: reward 0, and the reason in the log
                log.warning("kbench reward 0 for an item without a verdict: %s", v)
                rewards.append(0.0)
            else:
                rewards.append(min(score(v), 0.0) if v.status is Status.CHEAT else score(v))
        return rewards

    kbench_reward.__name__ = "kbench_reward"  # TRL logs each reward function under its name
    return kbench_reward
