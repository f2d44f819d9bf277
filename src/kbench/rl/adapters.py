"""Thin adapters to the conventions RL code uses today: a GRPO reward function (the Gymnasium env is
rl/gym.py, with the `rl` extra).

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
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kbench.api import Evaluator, Submission, Ticket
from kbench.errors import ConfigError, KbenchError
from kbench.rl.reward import Reward, as_reward
from kbench.types import Status, Verdict

log = logging.getLogger(__name__)
_lock = threading.Lock()
_evaluator: Evaluator | None = None


def shared_evaluator() -> Evaluator:
    """The process's Evaluator for the adapters a trainer loads by name (verl's reward function, the
    verifiers taskset): opened on first use from kbench's defaults and the KBENCH_* environment, closed at
    exit."""
    global _evaluator
    with _lock:
        if _evaluator is None or _evaluator.closed:
            import atexit

            from kbench.config import resolve

            _evaluator = Evaluator(resolve(None, {}))
            atexit.register(_evaluator.close)
        return _evaluator


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
        problems, texts = _batch(completions, kwargs, problem_column)
        return _scores(evaluate_texts(evaluator, problems, texts, backend, model), score)

    kbench_reward.__name__ = "kbench_reward"  # TRL logs each reward function under its name
    return kbench_reward


def grpo_reward_async(
    evaluator: Evaluator,
    reward: Reward | str = "speedup",
    *,
    problem_column: str = "problem",
    backend: str | None = None,
    model: str | None = None,
) -> Callable[..., Awaitable[list[float]]]:
    """`grpo_reward` as a coroutine function, for trainers that await their reward functions (TRL runs
    `async def` reward functions on its event loop, beside its other rewards): the batch is judged on a
    worker thread, the loop never blocks."""
    score = as_reward(reward)

    async def kbench_reward(prompts: Any = None, completions: Any = None, **kwargs: Any) -> list[float]:
        import asyncio

        problems, texts = _batch(completions, kwargs, problem_column)
        verdicts = await asyncio.to_thread(evaluate_texts, evaluator, problems, texts, backend, model)
        return _scores(verdicts, score)

    kbench_reward.__name__ = "kbench_reward"
    return kbench_reward


def _batch(completions: Any, columns: dict[str, Any], problem_column: str) -> tuple[list[str], list[str]]:
    """The batch's problems (its dataset column) and completion texts, or a ConfigError saying what is
    missing."""
    if completions is None:
        raise ConfigError("the reward function needs `completions` (GRPOTrainer passes them)")
    problems = columns.get(problem_column)
    if problems is None:
        raise ConfigError(
            f"the dataset has no {problem_column!r} column: add one naming each prompt's problem "
            "(e.g. '2/1'), or pass problem_column="
        )
    return list(problems), [completion_text(c) for c in completions]


def _scores(verdicts: list[Verdict | str], score: Reward) -> list[float]:
    rewards = []
    for v in verdicts:
        if isinstance(v, str):  # no verdict for this item: reward 0, and the reason in the log
            log.warning("kbench reward 0 for an item without a verdict: %s", v)
            rewards.append(0.0)
        else:
            rewards.append(min(score(v), 0.0) if v.status is Status.CHEAT else score(v))
    return rewards
