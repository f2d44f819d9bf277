"""Where the time of the CPU main job goes: the shipped cpp solutions, level 2, `small` preset, one by one.

    python benchmarks/cpu_main_job.py [--cache-dir DIR] [--out FILE.md]

The same verdicts as `kbench run --solutions reference` on a CPU-only machine, evaluated sequentially
with the worker launches wrapped, so each verdict's time splits into: static checks, the reference
worker (process start + torch import + model, outputs, eager timing, torch.compile timing) and the
candidate worker (setup = torch import + hooks + guard snapshots, import = build or cache load,
correctness, kernel use, timing). Run it twice with the same --cache-dir for cold and warm numbers.
Also prints the candidate and eager medians, minima and relative standard errors (timing stability).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import kbench.evaluate.flow as ev
from kbench.config import RunConfig
from kbench.pipeline import solution_jobs
from kbench.problems import select
from kbench.sandbox.protocol import read_result

CALLS: list[dict[str, Any]] = []


def _wrapped(original: Any) -> Any:
    def run_worker(module: str, jobdir: Path, spec: Any, budgets: Any, **kw: Any) -> Any:
        exit_ = original(module, jobdir, spec, budgets, **kw)
        result = read_result(jobdir, exit_.key) if not exit_.timed_out else None
        phases = dict(result.phases) if result is not None else {}
        phases["start+teardown"] = round(exit_.seconds - sum(phases.values()), 3)
        CALLS.append({"module": module.rsplit(".", 1)[-1], "seconds": exit_.seconds, "phases": phases})
        return exit_

    return run_worker


def _fmt(phases: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in phases.items())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache-dir", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    ev.run_worker = _wrapped(ev.run_worker)  # type: ignore[assignment]
    cfg = RunConfig(preset="small", device="cpu", backend="cpp", cache_dir=args.cache_dir)
    jobs = solution_jobs(select("kbench", level=2), ["cpp"])
    lines = ["| problem | status | verdict s | reference worker s (phases) | candidate worker s (phases) |"]
    lines.append("|---|---|---|---|---|")
    stab = [
        "| problem | candidate median / min ms (rse) | eager median / min ms (rse) | threads |",
        "|---|---|---|---|",
    ]
    t_all = time.perf_counter()
    for job in jobs:
        CALLS.clear()
        v = ev.evaluate(job.problem, job.candidate, cfg)
        ref = next((c for c in CALLS if c["module"] == "reference"), None)
        cand = next((c for c in CALLS if c["module"] == "worker"), None)
        cells = [f"{c['seconds']:.1f} ({_fmt(c['phases'])})" if c else "-" for c in (ref, cand)]
        lines.append(f"| {job.problem.key} | {v.status.value} | {v.seconds:.1f} | {cells[0]} | {cells[1]} |")
        eager = v.baseline("eager")
        t = v.timing
        stab.append(
            f"| {job.problem.key} | "
            + (f"{t.median_ms:.4f} / {t.min_ms:.4f} ({100 * t.rse:.1f}%)" if t else "-")
            + " | "
            + (f"{eager.median_ms:.4f} / {eager.min_ms:.4f} ({100 * eager.rse:.1f}%)" if eager else "-")
            + f" | {dict(t.extra).get('threads') if t else '-'} |"
        )
        print(lines[-1], flush=True)
    total = f"\n{len(jobs)} verdicts in {time.perf_counter() - t_all:.0f} s"
    text = "\n".join([*lines, "", *stab, total]) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
