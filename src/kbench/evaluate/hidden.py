"""Host side of `--hidden-shapes`: a candidate correct at the evaluated sizes is run again at sizes it never
saw (problems/hidden.py draws them per evaluation), through the same sandboxed jobs as the main run.

The trusted reference worker computes the outputs at the hidden sizes; a fresh candidate worker, started
only now, runs the candidate on inputs of a new secret seed (correctness and kernel use, no timing); the
host compares as for the main run. The verdict's `generalizes` is True when that run passes, False when it
does not, None when it did not run (the flag is off, the main verdict is not `ok`, the problem has no
hidden sizes, or the check itself failed: `Verdict.hidden` says which). A candidate caught cheating at the
hidden sizes is a `cheat` verdict: the rule is the same whatever the sizes.

The hidden sizes are in the verdict's `hidden` note for the records, never in its message or warnings:
those reach the model as refinement feedback (prompts/feedback.py).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import replace
from pathlib import Path

from kbench.config import RunConfig
from kbench.errors import ProblemError, WorkerError
from kbench.evaluate.candidate_run import run_candidate
from kbench.evaluate.judge import WorkerOutcome, check_outputs
from kbench.evaluate.plan import Plan, job_spec
from kbench.evaluate.prebuild import reference_env
from kbench.evaluate.reference_cache import ReferenceData
from kbench.evaluate.reference_run import absorb
from kbench.problems.hidden import HIDDEN, Hidden, draw, with_preset
from kbench.sandbox.host import REFEREE, run_worker
from kbench.sandbox.protocol import read_result
from kbench.types import Candidate, Problem, Status, TimingSettings


def hidden_reference(problem: Problem, cfg: RunConfig, plan: Plan, workdir: Path) -> ReferenceData:
    """The reference's outputs for `plan.secret` at the hidden preset: no cache (the sizes are this
    evaluation's own), no timing."""
    spec = job_spec(problem, cfg, plan, role="reference", seeds=plan.secret, baselines=[], measure=False)
    jobdir = workdir / "reference"
    env = reference_env(cfg, plan.device)
    exit_ = run_worker(REFEREE, jobdir, spec, cfg.budgets("reference"), env=env, start=cfg.worker_start)
    result = read_result(jobdir, exit_.key) if not exit_.timed_out else None
    if result is None or result.error:
        why = result.error if result is not None else f"did not finish:\n{exit_.log_tail}"
        raise ProblemError(f"{problem.key}: the reference at the hidden sizes {why}")
    data = ReferenceData(phases={**result.phases, "wall": round(exit_.seconds, 3)})
    absorb(data, result, jobdir)
    return data


def _sizes(hidden: Hidden) -> str:
    return ", ".join(f"{k}={v}" for k, v in hidden.sizes)


def _judged(
    outcome: WorkerOutcome, ref: ReferenceData, plan: Plan, jobdir: Path, tol: float
) -> WorkerOutcome:
    if outcome.status is not Status.OK:
        return outcome
    checked = check_outputs(outcome, jobdir, ref, plan.secret, plan.device, tol, plan.secret)
    flags = checked.result.flagged if checked.status is Status.OK and checked.result is not None else []
    if flags:
        return WorkerOutcome(Status.CHEAT, flags[0][1], flags[0][0], checked.result, checked.correctness)
    return checked


def run_hidden(
    problem: Problem,
    candidate: Candidate,
    cfg: RunConfig,
    device: str,
    settings: TimingSettings,
    workdir: Path,
) -> tuple[Hidden, WorkerOutcome]:
    """Draw hidden sizes and judge the candidate at them. Raises ProblemError/WorkerError for our failures."""
    hidden = draw(problem, cfg.preset)
    if not hidden.available:
        return hidden, WorkerOutcome(Status.OK)
    variant = with_preset(problem, dict(hidden.overrides))
    hcfg = cfg.model_copy(update={"preset": HIDDEN, "measure": False})
    plan = Plan(device=device, fixed=[], secret=[secrets.randbelow(2**62)], settings=settings)
    workdir.mkdir(parents=True)
    ref = hidden_reference(variant, hcfg, plan, workdir)
    outcome = run_candidate(variant, candidate, hcfg, plan, workdir)
    return hidden, _judged(outcome, ref, plan, workdir / "candidate", problem.tol(cfg.dtype))


def check_hidden(
    judged: WorkerOutcome, problem: Problem, candidate: Candidate, cfg: RunConfig, plan: Plan, workdir: Path
) -> WorkerOutcome:
    """`judged` with `generalizes` and `hidden` set (when `cfg.hidden_shapes` and `judged` is ok)."""
    if not cfg.hidden_shapes or judged.status is not Status.OK:
        return judged
    t0 = time.perf_counter()
    try:
        hidden, outcome = run_hidden(problem, candidate, cfg, plan.device, plan.settings, workdir / "hidden")
    except (ProblemError, WorkerError) as exc:  # our side failed: no answer, the main verdict stands
        return replace(judged, hidden=f"hidden-shape check not made: {str(exc).splitlines()[0]}")
    if not hidden.available:
        return replace(judged, hidden=f"no hidden sizes: {hidden.reason}")
    passed = outcome.status is Status.OK
    what = "passed" if passed else f"{outcome.status.value}: {(outcome.message or '-').splitlines()[0]}"
    note = f"at hidden sizes {_sizes(hidden)} ({time.perf_counter() - t0:.1f} s): {what}"
    if outcome.status is Status.CHEAT:
        message = f"at sizes not shown in the prompt: {outcome.message}"
        return replace(
            judged, status=Status.CHEAT, message=message, rule=outcome.rule, generalizes=False, hidden=note
        )
    warnings = [] if passed else [f"correct at the evaluated sizes, not at others: {outcome.status.value}"]
    return replace(judged, generalizes=passed, hidden=note, warnings=judged.warnings + warnings)
