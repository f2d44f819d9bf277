"""kbench as verl's custom reward function: `compute_score` (one item) and `compute_score_batch` (a batch).

verl loads a reward function by file path and name (`custom_reward_function.path` /
`custom_reward_function.name` in its config) and calls it with the dataset row's fields: its naive
reward manager one item at a time as `compute_score(data_source=, solution_str=, ground_truth=,
extra_info=)`, its batch reward manager once per batch as `compute_score(data_sources=, solution_strs=,
ground_truths=, extra_infos=)`. A kbench dataset row names its problem in `reward_model.ground_truth`
(e.g. "2/1": the address in the evaluator's source); the solution is the model's completion.

    custom_reward_function:
      path: <site-packages>/kbench/rl/verl.py      # python -c "import kbench.rl.verl as m; print(m.__file__)"
      name: compute_score_batch                    # with reward_model.reward_manager=batch
      reward_kwargs: {reward: speedup}

Each answer is a dict: `score` (the reward: `reward_kwargs.reward`, a name of rl/reward.py, default
speedup; a cheat earns at most 0) and what verl logs beside it: `correct`, `speedup` (vs eager, 0 when
none), `cheat`, and the one-line `error` of an item that got no verdict (reward 0). Nothing raises: a
bad item is its own 0. The Evaluator is opened on the first call, from kbench's defaults and the
KBENCH_* environment (`KBENCH_DEVICE=cpu KBENCH_BACKEND=cpp KBENCH_PRESET=small` on a machine without a
GPU; `KBENCH_STORE`, `KBENCH_CACHE_DIR` ...), and closed at exit; its verdicts are filed in one run as
`kbench run` files them, under the model `KBENCH_MODEL` (default "verl").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kbench.rl.adapters import evaluate_texts, shared_evaluator
from kbench.rl.reward import as_reward
from kbench.types import Status, Verdict


def compute_score(
    data_source: str | None = None,
    solution_str: str = "",
    ground_truth: str = "",
    extra_info: dict[str, Any] | None = None,
    reward: str = "speedup",
    **_: Any,
) -> dict[str, Any]:
    """One item (verl's naive reward manager)."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], reward=reward)[0]


def compute_score_batch(
    data_sources: Sequence[str | None] = (),
    solution_strs: Sequence[str] = (),
    ground_truths: Sequence[str] = (),
    extra_infos: Sequence[dict[str, Any] | None] = (),
    reward: str = "speedup",
    **_: Any,
) -> list[dict[str, Any]]:
    """A batch (verl's batch reward manager), judged at once: builds in parallel, one answer per item."""
    problems = [
        _problem(g, (extra_infos[i] if i < len(extra_infos) else None)) for i, g in enumerate(ground_truths)
    ]
    try:
        score = as_reward(reward)
        ev = shared_evaluator()
    except Exception as exc:  # the evaluator itself cannot open: every item says why, none raises
        return [_failed(f"kbench could not start: {exc}") for _ in solution_strs]
    verdicts = evaluate_texts(ev, problems, list(solution_strs), None, ev.config.model or "verl")
    return [_answer(v, score) for v in verdicts]


def _problem(ground_truth: Any, extra_info: dict[str, Any] | None) -> str:
    """The item's problem address: its ground truth, else its extra_info's `problem`."""
    if isinstance(ground_truth, str) and ground_truth:
        return ground_truth
    return str((extra_info or {}).get("problem", ""))


def _answer(v: Verdict | str, score: Any) -> dict[str, Any]:
    if isinstance(v, str):
        return _failed(v)
    value = score(v)
    cheat = v.status is Status.CHEAT
    return {
        "score": min(value, 0.0) if cheat else float(value),
        "correct": float(v.ok),
        "speedup": float(v.speedup("eager") or 0.0),
        "cheat": float(cheat),
        "status": v.status.value,
        "error": "",
    }


def _failed(reason: str) -> dict[str, Any]:
    return {"score": 0.0, "correct": 0.0, "speedup": 0.0, "cheat": 0.0, "status": "", "error": reason}
