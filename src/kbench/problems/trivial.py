"""Trivial answers against every problem: would a candidate that does no real work get `ok`?

A benchmark whose comparison accepts zeros, a copy of the input, the reference computed at a lower
precision, or noise of the right scale rewards nothing. For one problem this computes each such answer
from the reference's own inputs and outputs and judges it with the evaluator's comparison
(`problems.compare.compare` with `Problem.tol`), on the evaluator's fixed seeds and input generation
(`problems.inputs.make_inputs`), the model built and cast as the reference worker builds it. So the verdict
here is the one the evaluator would give, without a sandbox: no candidate code runs.

An answer fails when it fails on any seed (the evaluator needs every seed to pass), so seeds after the
first run only while some answer still passes: most problems cost two fp32 forwards (a calibration seed
and the first seed) and one per lower precision. The answers (`ANSWERS`, a registry):

- zeros: every output all zeros.
- first-input: a copy of the first tensor input, in the output's dtype, reshaped when it has as many
  elements, else its first elements in the output's shape (a view proper is already refused by the
  worker's `output-aliases-input` rule: what remains is whether the values would pass).
- fp16, bf16: the reference computed in that dtype (model and floating inputs cast, as an fp16/bf16
  evaluation runs it) and cast back; for fp32 evaluations only (the fp16/bf16 tolerance, 1e-2, is looser
  than bf16's rounding by design).
- stale: the reference's output for another input set (the calibration seed, which the evaluator never
  uses): what a candidate that precomputed one output and returns it for every input would give.
- random: normal noise with the calibration output's mean and standard deviation (integers: uniform over
  its range): what a candidate could learn of the output offline.
- constant: the calibration output's mean everywhere (integers: its median): a near-constant output.

A training problem is judged by its step (problems/training.py: the forward's outputs, then the gradients),
so every answer above covers its gradients too; two more answer for the backward alone, the forward's
outputs right:

- zero-gradients: every gradient zero (a backward skipped, or inputs detached).
- forward-as-gradient: each gradient the forward's first output, reshaped as first-input reshapes (a
  backward that hands the forward's result on).

Besides the verdicts, each answer reports the tolerance it would need (`Comparison.needed_tol`), and
with `fp64` the reference's own distance from a float64 computation: the room a tolerance has between
honest rounding and the nearest trivial answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from kbench.errors import ConfigError, ProblemError
from kbench.problems.answers import (
    ANSWERS,
    CALIBRATION_SEED,
    SeedCase,
    applicable,
    output_stats,
)
from kbench.problems.compare import compare, needed_tol
from kbench.problems.format import parse_problem
from kbench.problems.inputs import TORCH_DTYPES, flatten_outputs, ieee_numerics, make_inputs
from kbench.problems.loader import LoadedProblem, build_model, load, where
from kbench.problems.training import trainable
from kbench.types import Problem


@dataclass(frozen=True)
class AnswerVerdict:
    """What the evaluator would say to one trivial answer: `passed` means it would get `ok`."""

    name: str
    passed: bool
    needed_tol: float  # the tolerance it would pass at on the seeds judged (inf: wrong shape or dtype)
    detail: str  # failed: the seed and why


@dataclass(frozen=True)
class TrivialResult:
    problem_key: str
    name: str
    preset: str
    dtype: str
    device: str
    tol: float
    answers: tuple[AnswerVerdict, ...] = ()
    reference_error: float | None = None  # needed_tol of the reference against float64 (with fp64)
    error: str = ""  # the reference itself did not run: no answer was judged
    seconds: float = 0.0

    @property
    def passing(self) -> list[str]:
        """The trivial answers that would get `ok` (the problem or its tolerance needs fixing)."""
        return [a.name for a in self.answers if a.passed]

    @property
    def failed(self) -> bool:
        return bool(self.error or self.passing)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["passing"] = self.passing
        return data


SCREEN_MARGIN = 2.0  # an answer needing more than this times the tolerance fails without the host compare


def passes(outs: list[Any], refs: list[Any], tol: float) -> tuple[bool, str, float]:
    """(passed, why not, needed tolerance) for one seed's outputs, as the evaluator compares them.

    Outputs the device-side screen finds beyond SCREEN_MARGIN x the tolerance fail there; every other one
    (a pass, a near miss, a structural mismatch) is judged by `compare` itself, on the host as the
    evaluator does: of a `full` sweep's ~90 GiB of outputs per seed, only those within reach of passing
    cross to the host."""
    if len(outs) != len(refs):
        return False, f"{len(outs)} outputs, expected {len(refs)}", float("inf")
    needed, why = 0.0, ""
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        screened = needed_tol(o, r) if o.shape == r.shape and o.dtype == r.dtype else 0.0
        if screened > SCREEN_MARGIN * tol:
            needed = max(needed, screened)
            why = why or f"output {i}: needs tol {screened:.3g} (> {tol:g})"
            continue
        c = compare(o, r, tol)
        needed = max(needed, c.needed_tol if not c.rule else float("inf"))
        if not c.passed and not why:
            why = f"output {i}: {(c.report or c.rule).splitlines()[0]}"
    return not why, why, needed


@dataclass
class _Tally:
    alive: dict[str, float] = field(default_factory=dict)  # answer -> tolerance needed so far
    dead: dict[str, tuple[float, str]] = field(default_factory=dict)  # answer -> (needed, why it fails)


def _run_seed(case: SeedCase, tol: float, tally: _Tally) -> None:
    for name in list(tally.alive):
        try:
            outs = ANSWERS[name](case)
        except Exception as exc:  # e.g. an operator without an fp16 kernel on this device: no answer
            tally.dead[name] = (
                float("inf"),
                f"seed {case.seed}: not computable ({type(exc).__name__}: {exc})",
            )
            del tally.alive[name]
            continue
        passed, why, needed = passes(outs, case.outputs, tol)
        needed = max(needed, tally.alive.pop(name))
        if passed:
            tally.alive[name] = needed
        else:
            tally.dead[name] = (needed, f"seed {case.seed}: {why}"[:300])


def _forward(loaded: LoadedProblem, model: Any, seed: int, dtype: str, device: Any) -> tuple[Any, list[Any]]:
    """(a copy of the first tensor input, the outputs) of the reference for `seed`."""
    import torch

    inputs = make_inputs(loaded.get_inputs, seed, device, dtype)
    first = next((x.detach().clone() for x in inputs if isinstance(x, torch.Tensor)), None)
    with torch.no_grad():
        outputs = flatten_outputs(model(*inputs))
    bad = [type(v).__name__ for v in outputs if not isinstance(v, torch.Tensor)]
    if bad:
        raise TypeError(f"the reference returned {', '.join(bad)} (a tensor or tuple of tensors expected)")
    return first, [v.detach() for v in outputs]


def _fp64_error(
    loaded: LoadedProblem, seed: int, device: Any, init_seed: int, refs: list[Any]
) -> float | None:
    """needed_tol of the reference's outputs against the same computation in float64 (None: no float64)."""
    import torch

    model = loaded.judged(build_model(loaded, init_seed).to(device).to(torch.float64))
    inputs = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in
              make_inputs(loaded.get_inputs, seed, device, "fp32")]  # fmt: skip
    try:
        with torch.no_grad():
            exact = flatten_outputs(model(*inputs))
    except (RuntimeError, NotImplementedError, TypeError):  # an operator without a float64 kernel here
        return None
    return max((needed_tol(r.double(), e.double()) for r, e in zip(refs, exact, strict=True)), default=0.0)


@dataclass(frozen=True)
class SweepSettings:
    """How a sweep runs: the evaluator's preset, dtype, device, seeds and init seed."""

    preset: str = "small"
    dtype: str = "fp32"
    device: str = "cpu"
    seeds: tuple[int, ...] = ()  # empty: the evaluator's fixed seeds (evaluator_seeds)
    init_seed: int = 42
    fp64: bool = False  # also measure the reference's own error against float64
    answers: tuple[str, ...] = ()  # empty: every applicable answer in ANSWERS


def sweep_problem(problem: Problem, settings: SweepSettings = SweepSettings()) -> TrivialResult:  # noqa: B008
    """Judge every applicable trivial answer on one problem."""
    import torch

    s = settings
    t0 = time.perf_counter()
    tol = problem.tol(s.dtype)
    base = dict(problem_key=problem.key, name=problem.name, preset=s.preset, dtype=s.dtype, device=s.device)
    training = _training(problem)
    alive = [n for n in s.answers or ANSWERS if applicable(n, s.dtype, training is not None)]
    tally = _Tally(alive=dict.fromkeys(alive, 0.0))
    device, fp64_error = torch.device(s.device), None
    ieee_numerics()
    try:
        loaded = load(problem, s.preset)
        built = build_model(loaded, s.init_seed).to(device)
        if s.dtype != "fp32":
            built = built.to(TORCH_DTYPES[s.dtype])
        model = loaded.judged(built)
        gradients = len(training.grad_inputs) + len(trainable(built)) if training is not None else 0
        stale = _forward(loaded, model, CALIBRATION_SEED, s.dtype, device)[1]
        calibration = [output_stats(r) for r in stale]
        for i, seed in enumerate(s.seeds or evaluator_seeds()):
            if not tally.alive:
                break
            first, outputs = _forward(loaded, model, seed, s.dtype, device)
            if i == 0 and s.fp64:
                fp64_error = _fp64_error(loaded, seed, device, s.init_seed, outputs)
            case = SeedCase(loaded, seed, device, s.init_seed, first, outputs, stale, calibration, gradients)
            _run_seed(case, tol, tally)
    except Exception as exc:  # the reference's own failure is the result, never a crash of the sweep
        return TrivialResult(**base, tol=tol, error=f"{type(exc).__name__}: {exc}"[:500])  # type: ignore[arg-type]
    verdicts = [AnswerVerdict(n, True, need, "") for n, need in tally.alive.items()]
    verdicts += [AnswerVerdict(n, False, need, why) for n, (need, why) in tally.dead.items()]
    verdicts.sort(key=lambda a: list(ANSWERS).index(a.name))
    return TrivialResult(
        **base,  # type: ignore[arg-type]
        tol=tol,
        answers=tuple(verdicts),
        reference_error=fp64_error,
        seconds=time.perf_counter() - t0,
    )


def _training(problem: Problem) -> Any:
    """The problem's KBENCH_TRAINING (None: inference, or a file that does not parse, which `load`
    reports as the sweep's error)."""
    try:
        return parse_problem(problem.code, where(problem)).training
    except ProblemError:
        return None


def evaluator_seeds() -> tuple[int, ...]:
    """The fixed correctness seeds `kbench eval` uses with the default config (evaluate.plan.make_plan)."""
    from kbench.config import FIXED_SEED_BASE, RunConfig

    return tuple(FIXED_SEED_BASE + i for i in range(RunConfig().seeds))


def sweep(
    problems: list[Problem],
    settings: SweepSettings = SweepSettings(),  # noqa: B008
    on_result: Callable[[TrivialResult], None] | None = None,
) -> list[TrivialResult]:
    unknown = [n for n in settings.answers if n not in ANSWERS]
    if unknown:
        raise ConfigError(f"unknown trivial answer(s) {', '.join(unknown)}; known: {', '.join(ANSWERS)}")
    if not settings.seeds:
        settings = replace(settings, seeds=evaluator_seeds())
    results = []
    for problem in problems:
        result = sweep_problem(problem, settings)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results
