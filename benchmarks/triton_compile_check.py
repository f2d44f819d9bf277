"""Compile-check every shipped Triton level-2 solution for sm_90 on a CPU-only machine.

    python benchmarks/triton_compile_check.py [--ids 1,23] [--out OUT/triton-compile-check.md]

Each solution is judged as `kbench eval --device cpu --preset small --no-timing` judges a candidate (a
`kbench.api.Evaluator` opened as that command opens it, benchmarks/engine.py): the interpreter dry run
records the launches, then a clean process compiles each launched kernel for sm_90
(kbench.backends.tritoncheck). Prints one row per solution (status, seconds, the compile log's first
line) and the total; a solution that is not `ok` is a finding.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from engine import one_by_one

from kbench.api import Evaluator, Submission
from kbench.config import RunConfig
from kbench.problems import get_problem
from kbench.solutions import shipped_candidate as reference_candidate
from kbench.solutions import solution_paths


def _check(ev: Evaluator, n: int) -> tuple[str, bool]:
    """Problem 2/n's shipped Triton solution judged: its table row, and whether it is ok."""
    problem = get_problem(f"kbench:2/{n}")
    candidate = reference_candidate(problem, "triton")
    assert candidate is not None
    v = ev.submit(Submission(problem, candidate.source, "triton")).verdict()
    log = v.build.log if v.build is not None else ""
    compiled = sum("compiled for sm_90" in line for line in log.splitlines())
    detail = v.message.splitlines()[0][:100] if v.message else f"{compiled} kernel(s) compiled"
    return f"| {problem.key} | {v.status.value} | {v.seconds:.1f} | {detail} |", v.status.value == "ok"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ids", default="", help="comma-separated problem ids (default: all)")
    ap.add_argument("--out", type=Path, default=None, help="write the table as markdown here")
    args = ap.parse_args()
    wanted = {int(x) for x in args.ids.split(",") if x}
    ids = sorted(n for (level, n) in solution_paths("triton") if level == 2 and (not wanted or n in wanted))
    rows, failed, t_all = [], 0, time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kbench-tcc-") as tmp:
        cfg = RunConfig(preset="small", device="cpu", backend="triton", measure=False, cache_dir=Path(tmp))
        with one_by_one(cfg) as ev:
            for n in ids:
                row, ok = _check(ev, n)
                rows.append(row)
                failed += not ok
                print(row, flush=True)
    total = time.perf_counter() - t_all
    table = ["| problem | status | s | detail |", "|---|---|---|---|", *rows]
    table.append(f"\n{len(ids) - failed}/{len(ids)} ok, {total:.0f} s total")
    print(table[-1])
    if args.out is not None:
        args.out.write_text("\n".join(table) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
