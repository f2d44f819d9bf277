"""The checked timed calls: chosen after they ran, compared with the reference by the referee (trusted).

Every timed call gets inputs made for it alone (referee/feed.py), so no memo -- by pointer, shape,
version, sampled values or a full hash -- ever meets inputs it saw before. After each batch, once the
runner has answered and its outputs are in the referee's slots (committed: what the runner writes
there later is never read), the referee draws which of the batch's calls it checks, from the operating
system's entropy, and computes the reference's output for each of those calls itself -- the problem's
`Model`, built in this process under the init seed as the reference's job builds it, on the call's
pristine inputs -- and compares the two whole outputs at the problem's tolerance (problems/compare.py).
Nothing of this reaches the runner: not the choice, not the reference's output, not the result.

How many: each call is checked with probability `share(N)` for a loop of N calls: at least `MIN_SHARE`,
and at least `CHECKED / N`, so a loop checks about `CHECKED` calls or more. A candidate wrong on a share
w of its timed calls, whichever it picks, escapes only if no wrong call is drawn: (1 - w * share)^N, at
most exp(-w * CHECKED) (below 1 % for w = 10 % at any kernel duration), and exp(-w * MIN_SHARE * N) for a
long loop (a 2 % cheat: 1.8 % in a loop of 2,000 calls, 2e-9 in one of 10,000).
"""

from __future__ import annotations

import secrets
from typing import Any

CHECKED = 50  # expected checked calls of a loop, at least: exp(-0.1 * 50) < 1 %
MIN_SHARE = 0.1  # of a long loop's calls, checked
_DRAW_BITS = 53


def share(calls: int) -> float:
    """The probability that each call of a loop of `calls` calls is checked."""
    return min(1.0, max(MIN_SHARE, CHECKED / max(calls, 1)))


def miss_probability(wrong_share: float, calls: int) -> float:
    """The chance that a loop of `calls` calls checks none of a `wrong_share` of wrong calls."""
    return (1.0 - wrong_share * share(calls)) ** calls


def drawn(count: int, probability: float) -> list[int]:
    """Which of `count` calls are checked, each with `probability`, from the OS's entropy."""
    limit = int(probability * (1 << _DRAW_BITS))
    return [i for i in range(count) if secrets.randbits(_DRAW_BITS) < limit]


class Flagged(Exception):
    """A checked call did not match: the loop ends, and the host judges it once the candidate's
    correctness outputs are known to be right (a wrong candidate is a `mismatch` first)."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule, self.message = rule, message


class Checker:
    """The reference's model in the referee's process, and the comparison of a call's outputs with it."""

    def __init__(
        self, problem: Any, preset: str, dtype: str, device: str, init_seed: int, forward: bool = False
    ) -> None:
        self.problem, self.preset, self.dtype, self.device = problem, preset, dtype, device
        self.init_seed, self.forward = init_seed, forward  # forward: a training step's forward alone
        self.tol = problem.tol(dtype)
        self.model: Any = None
        self.checked = 0

    def _model(self) -> Any:
        if self.model is None:
            import torch

            from kbench.problems import build_model, load
            from kbench.problems.inputs import TORCH_DTYPES, ieee_numerics

            ieee_numerics()
            torch.set_grad_enabled(False)
            loaded = load(self.problem, self.preset)
            model = build_model(loaded, self.init_seed).to(torch.device(self.device))
            model = model.to(TORCH_DTYPES[self.dtype]) if self.dtype != "fp32" else model
            step = loaded.judged(model)  # a training problem's step: its gradients checked too
            self.model = step.forward_only if self.forward else step
        return self.model

    def prepare(self) -> None:
        """Build the model now (before the loop), not at the first check."""
        self._model()

    def check(
        self, call: int, inputs: list[Any], literals: list[Any], outputs: list[Any], count: bool = True
    ) -> None:
        """Raise `Flagged` (timing-output-mismatch) unless `outputs` match the reference's on `inputs`;
        `count`: a timed call's check (counted in `checked`)."""
        from kbench.problems.compare import compare
        from kbench.problems.inputs import flatten_outputs

        tensors = iter(inputs)
        args = [next(tensors) if v is None else v for v in literals]
        expected = flatten_outputs(self._model()(*args))
        self.checked += count
        if len(expected) != len(outputs):
            raise Flagged(
                "timing-output-mismatch",
                f"timed call {call} returned {len(outputs)} outputs, not {len(expected)}",
            )
        for i, (got, want) in enumerate(zip(outputs, expected, strict=True)):
            result = compare(got, want.detach(), self.tol)
            if not result.passed:
                first = (result.report or "").splitlines()[0] if result.report else ""
                raise Flagged(
                    "timing-output-mismatch",
                    f"output {i} of timed call {call} (checked after it ran) does not match the reference: {first}",
                )
