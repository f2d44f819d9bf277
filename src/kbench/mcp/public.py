"""What an agent may see of a problem, a build and a verdict: the MCP tools' results, made from kbench's
own types by allow-list, so a field added to a Verdict later stays on the host until it is named here.

Never shown: seeds (a verdict's `correctness.seeds` holds the run's secret one), the reference's output
values (a mismatch report's `got X, expected Y` lines), log tails and host paths (the cache, job and
build folders). Error sizes, mismatch counts and the first line of a mismatch report are shown.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from kbench.metrics import sol_fraction
from kbench.types import BuildResult, CheckReport, Problem, Verdict

# an absolute path of two or more parts (/tmp/kbench-build-x/candidate.py): shown as its last part
_PATH = re.compile(r"(?<![\w.])/(?:[\w.+-]+/)+([\w.+-]+)")
_BUILD_LOG_CHARS = 4000  # a compiler's first errors; a whole g++ log of a template error runs to 100 kB


def scrub(text: str) -> str:
    """`text` without host paths and without the reference's values (the lines that show `expected`)."""
    lines = [line for line in text.splitlines() if "expected " not in line or "got " not in line]
    kept = "\n".join(lines).replace("; first positions:", "")
    return _PATH.sub(lambda m: m.group(1), kept)


def problem_row(p: Problem) -> dict[str, Any]:
    return {"problem": p.key, "level": p.level, "id": p.number, "name": p.name, "tags": list(p.tags)}


def findings(report: CheckReport) -> list[dict[str, Any]]:
    return [
        {"rule": f.rule, "severity": f.severity.value, "message": scrub(f.message), "line": f.line}
        for f in report.findings
    ]


def build_view(build: BuildResult) -> dict[str, Any]:
    view: dict[str, Any] = {
        "ok": build.ok,
        "seconds": round(build.seconds, 2),
        "kernels": list(build.kernels),
    }
    if not build.ok:
        view["status"] = build.status
        view["message"] = scrub(build.message)
        view["log"] = scrub(build.log)[-_BUILD_LOG_CHARS:]
    return view


def _speedups(v: Verdict) -> dict[str, float]:
    return {mode: round(s, 4) for mode, _ in v.baselines if (s := v.speedup(mode)) is not None}


def verdict_view(v: Verdict, sol_ms: float | None = None) -> dict[str, Any]:
    """A verdict as a tool answers it: status, rule, message, error sizes and timings, nothing else; with
    the problem's speed-of-light on the verdict's GPU (`sol_ms`, or the verdict's own) where it is known,
    and the fraction of it the candidate reached where it was timed."""
    view: dict[str, Any] = {
        "problem": v.problem_key,
        "status": v.status.value,
        "backend": v.backend,
        "preset": v.preset,
        "dtype": v.dtype,
        "device": v.device,
        "message": scrub(v.message),
    }
    if v.rule:
        view["rule"] = v.rule
    if v.checks.findings:
        view["findings"] = findings(v.checks)
    if v.build is not None and not v.build.ok:
        view["build"] = build_view(v.build)
    if v.correctness is not None:
        c = v.correctness
        view["correctness"] = {
            "passed": c.passed,
            "max_abs_err": c.max_abs_err,
            "mean_abs_err": c.mean_abs_err,
            "max_rel_err": c.max_rel_err,
            "report": scrub(c.report),
        }
    if v.timing is not None:
        view["candidate_ms"] = round(v.timing.median_ms, 6)
        view["timing_meaningful"] = v.timing.meaningful
        view["baselines_ms"] = {mode: round(t.median_ms, 6) for mode, t in v.baselines}
        view["speedups"] = _speedups(v)
    sol = v.sol_ms if v.sol_ms is not None else sol_ms
    if sol is not None:
        view["sol_ms"] = sol
        fraction = sol_fraction(replace(v, sol_ms=sol))
        if fraction is not None:
            view["sol_fraction"] = float(f"{fraction:.4g}")  # a small preset's reaches 1e-4 on a GPU
    if v.generalizes is not None:
        view["generalizes"] = v.generalizes
    if v.warnings:
        view["warnings"] = [scrub(w) for w in v.warnings]
    return view


def own_kernels(v: Verdict) -> dict[str, Any]:
    """The candidate's own kernels that ran in its forward and their share of its time (a profile's view
    of the referee's kernel-use check): on a GPU of device time, on the CPU of sampled CPU time."""
    ran = list(v.build.kernels) if v.build is not None else []
    where = "device time" if v.device.startswith("cuda") else "CPU time, sampled"
    share = None if v.kernel_share is None else round(v.kernel_share, 4)
    return {"ran": ran, "time_share": share, "share_of": where}
