"""A verdict from an evaluation's outcome (host side): build facts, timings and baselines, warnings, phases
(the speed-of-light floor the timing is checked against: evaluate/floor.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from kbench.baselines.modes import TIMED_MODES, forward_of
from kbench.config import RunConfig
from kbench.evaluate.judge import WorkerOutcome
from kbench.evaluate.phases import Account
from kbench.evaluate.reference_cache import ReferenceData
from kbench.problems.loader import preset_used
from kbench.store.reuse import measured
from kbench.types import BuildResult, Candidate, CheckReport, Problem, Status, TimingStats, Verdict

if TYPE_CHECKING:
    from kbench.evaluate.plan import Plan

SUSPICIOUS_SPEEDUP = 100.0  # warn above this speedup over eager; verdict unchanged without a SOL bound


def _warnings(
    checks: CheckReport, timing: TimingStats | None, baselines: dict[str, TimingStats]
) -> list[str]:
    out = [f"static:{f.rule}: {f.message}" for f in checks.findings]
    if timing is not None:
        if not timing.meaningful:
            out.append("timings are not meaningful (Triton interpreter on the CPU)")
        if timing.clock is not None and timing.clock.clocks_moved:
            out.append(f"GPU SM clock moved more than 5% during timing: {list(timing.clock.sm_clock_mhz)}")
        eager = baselines.get("eager")
        if (
            eager is not None
            and timing.median_ms > 0
            and eager.median_ms / timing.median_ms > SUSPICIOUS_SPEEDUP
        ):
            out.append(
                f"suspicious speedup {eager.median_ms / timing.median_ms:.0f}x over eager: inspect the kernel"
            )
    return out


@dataclass
class Evaluation:
    """What one evaluation's steps share (flow.OneVerdict): its inputs, its plan, the static checks'
    report, the stored baselines it reuses, its build, and the account of its time."""

    problem: Problem
    candidate: Candidate
    cfg: RunConfig
    plan: Plan
    acct: Account
    checks: CheckReport = field(default_factory=CheckReport)
    reused: dict[str, TimingStats] = field(default_factory=dict)
    built: BuildResult | None = None
    sol_ms: float | None = None  # the problem's speed of light on this GPU (floor.speed_of_light)


def make_verdict(ev: Evaluation, outcome: WorkerOutcome, ref: ReferenceData | None) -> Verdict:
    """The verdict of `outcome`: its status and message, build facts, timing and baselines, warnings,
    phases."""
    problem, candidate, cfg, plan, checks, built = (
        ev.problem,
        ev.candidate,
        ev.cfg,
        ev.plan,
        ev.checks,
        ev.built,
    )
    result = outcome.result
    build = built if built is not None and not built.ok else None
    if result is not None:
        build = BuildResult(
            ok=outcome.status is not Status.BUILD_ERROR,
            backend=candidate.backend,
            seconds=result.build_seconds,
            cache_hit=result.build_cache_hit,
            recipe=result.build_recipe,
            log=result.build_log,
            kernels=tuple(result.kernels_ran),
        )
    timing = result.timing if result is not None else None
    timed = measured(ref.timings, asdict(plan.settings), ref.cache_hit, ref.shared) if ref else {}
    baselines = timed | ev.reused
    forward = _forward_passes(result.timings if result is not None else {}, baselines)
    return Verdict(
        status=outcome.status,
        problem_key=problem.key,
        backend=candidate.backend,
        preset=preset_used(problem, cfg.preset),  # the one that ran: `full` where the problem lacks it
        dtype=cfg.dtype,
        device=plan.device,
        message=outcome.message,
        rule=outcome.rule,
        log_tail=outcome.log_tail,
        candidate_digest=candidate.digest,
        checks=checks,
        build=build,
        correctness=outcome.correctness,
        timing=timing if outcome.status is Status.OK else None,
        baselines=tuple((m, baselines[m]) for m in TIMED_MODES if m in baselines),
        kernel_share=result.kernel_share if result is not None else None,
        warnings=tuple(_warnings(checks, timing, baselines) + outcome.warnings),
        seconds=round(ev.acct.seconds(), 3),
        phases=ev.acct.items(),
        generalizes=outcome.generalizes,
        hidden=outcome.hidden,
        confinement=result.confinement if result is not None else "",
        forward=forward if outcome.status is Status.OK else (),
        sol_ms=ev.sol_ms if outcome.status is Status.OK else None,
    )


def _forward_passes(
    candidate: Mapping[str, TimingStats], baselines: Mapping[str, TimingStats]
) -> tuple[tuple[str, TimingStats], ...]:
    """A training step's forward-alone times: the candidate's, then each baseline mode's."""
    found = dict(candidate) | dict(baselines)
    names = ["candidate", *TIMED_MODES]
    return tuple((name, found[forward_of(name)]) for name in names if forward_of(name) in found)
