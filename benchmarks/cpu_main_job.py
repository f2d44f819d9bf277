"""Where the time of the CPU main job goes: the shipped cpp solutions, level 2, `small` preset, one by one.

    python benchmarks/cpu_main_job.py [--cache-dir DIR] [--out FILE.md]

The same verdicts as `kbench run --solutions reference` on a CPU-only machine, judged one after another
by a `kbench.api.Evaluator` opened as `kbench eval` opens it (each verdict its own reference run and
build, benchmarks/engine.py), each verdict's time split by its recorded phases into: static checks, the
reference worker (process start + torch import + model, outputs, eager timing, torch.compile timing) and the
candidate worker (setup = torch import + hooks + guard snapshots, import = build or cache load,
correctness, kernel use, timing). Run it twice with the same --cache-dir for cold and warm numbers.
Also prints the candidate and eager medians, minima and relative standard errors (timing stability).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from engine import one_by_one

from kbench.api import Submission
from kbench.config import RunConfig
from kbench.problems import select
from kbench.solutions import shipped_candidate
from kbench.types import TimingStats, Verdict


def _fmt(phases: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in phases.items())


def _threads(stats: TimingStats | None) -> object:
    """The CPU threads a baseline was timed with, from the timing settings it records; '-' where none."""
    if stats is None or stats.provenance is None or not stats.provenance.timing_settings:
        return "-"
    return json.loads(stats.provenance.timing_settings).get("threads", "-")


def _phase_row(key: str, v: Verdict) -> str:
    cells, top = [], dict(v.phases)
    for side in ("ref", "cand"):  # the part's host seconds, then its worker's phases of 0.05 s or more
        inner = {k.split(":", 1)[1]: t for k, t in v.phases if k.startswith(f"{side}:") and t >= 0.05}
        cells.append(f"{top[side]:.1f} ({_fmt(inner)})" if side in top else "-")
    return f"| {key} | {v.status.value} | {v.seconds:.1f} | {cells[0]} | {cells[1]} |"


def _stability_row(key: str, v: Verdict) -> str:
    eager, t = v.baseline("eager"), v.timing
    return (
        f"| {key} | "
        + (f"{t.median_ms:.4f} / {t.min_ms:.4f} ({100 * t.rse:.1f}%)" if t else "-")
        + " | "
        + (f"{eager.median_ms:.4f} / {eager.min_ms:.4f} ({100 * eager.rse:.1f}%)" if eager else "-")
        + f" | {_threads(eager)} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache-dir", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    cfg = RunConfig(preset="small", device="cpu", backend="cpp", cache_dir=args.cache_dir)
    shipped = [(p, shipped_candidate(p, "cpp")) for p in select("kbench", level=2)]
    jobs = [(p, c) for p, c in shipped if c is not None]
    lines = ["| problem | status | verdict s | reference worker s (phases) | candidate worker s (phases) |"]
    lines.append("|---|---|---|---|---|")
    stab = [
        "| problem | candidate median / min ms (rse) | eager median / min ms (rse) | threads |",
        "|---|---|---|---|",
    ]
    t_all = time.perf_counter()
    with one_by_one(cfg) as ev:
        for problem, candidate in jobs:
            v = ev.submit(Submission(problem, candidate.source, candidate.backend)).verdict()
            lines.append(_phase_row(problem.key, v))
            stab.append(_stability_row(problem.key, v))
            print(lines[-1], flush=True)
    total = f"\n{len(jobs)} verdicts in {time.perf_counter() - t_all:.0f} s"
    text = "\n".join([*lines, "", *stab, total]) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
