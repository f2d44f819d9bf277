"""Evaluator on a CUDA machine: honest CUDA and Triton candidates, an illegal-address kernel followed by
an honest one, and one candidate evaluated twice for timing repeatability.

    python benchmarks/evaluator_gpu.py --out OUT

The steps go one after another to one `kbench.api.Evaluator` that keeps the problem's reference run for
every step (benchmarks/engine.py); each candidate is built inside its evaluation, so a step's verdict
seconds include its build (cold for the first CUDA step, a cache hit after).

Writes result.json and result.md (machine, versions, date, verdicts, times per verdict) to --out.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from common import BENCHMARKS, utc_now
from engine import shared

from kbench.api import Submission
from kbench.config import RunConfig
from kbench.hardware import environment
from kbench.problems import get_problem
from kbench.types import Verdict

CANDIDATES = BENCHMARKS / "candidates"
# (label, file, backend, statuses that count as expected)
STEPS = [
    ("cuda honest (cold build)", "cuda_gemm_relu.py", "cuda", ("ok",)),
    ("triton honest", "triton_gemm_relu.py", "triton", ("ok",)),
    ("cuda illegal address", "cuda_illegal_address.py", "cuda", ("runtime_error", "crashed")),
    ("cuda honest after the crash (warm build)", "cuda_gemm_relu.py", "cuda", ("ok",)),
    ("cuda honest, repeat for repeatability", "cuda_gemm_relu.py", "cuda", ("ok",)),
]


def row(label: str, v: Verdict, expected: tuple[str, ...]) -> dict[str, Any]:
    return {
        "step": label,
        "status": v.status.value,
        "expected": v.status.value in expected,
        "rule": v.rule,
        "message": v.message[:300],
        "median_ms": v.timing.median_ms if v.timing else None,
        "rse": v.timing.rse if v.timing else None,
        "n": v.timing.n if v.timing else None,
        "method": v.timing.method if v.timing else None,
        "speedup_eager": v.speedup("eager"),
        "speedup_compile": v.speedup("compile"),
        "kernel_share": v.kernel_share,
        "build_s": v.build.seconds if v.build else None,
        "build_cache_hit": v.build.cache_hit if v.build else None,
        "verdict_s": v.seconds,
        "warnings": list(v.warnings),
    }


def markdown(data: dict[str, Any]) -> str:
    lines = [
        f"# Evaluator on {data['machine'].get('gpu')} ({data['date']})",
        "",
        f"problem {data['problem']}",
        "",
    ]
    lines.append(
        "| step | status | expected | median ms | rse | speedup eager | speedup compile | build s | verdict s |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for r in data["steps"]:
        cells = [
            r["step"],
            r["status"],
            r["expected"],
            r["median_ms"],
            r["rse"],
            r["speedup_eager"],
            r["speedup_compile"],
            r["build_s"],
            r["verdict_s"],
        ]
        lines.append("| " + " | ".join(f"{c:.4g}" if isinstance(c, float) else str(c) for c in cells) + " |")
    lines += ["", f"timing repeatability (same candidate twice): {data['repeatability_rel_diff']:.4%}", ""]
    lines += ["```json", json.dumps(data["machine"], indent=2), "```"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--problem", default="kbench:2/1")
    parser.add_argument("--preset", default="full")
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: a fresh folder (cold builds)")
    args = parser.parse_args()
    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="kbench-gpu-bench-"))
    problem = get_problem(args.problem)
    rows = []
    cfg = RunConfig(
        preset=args.preset, device="cuda", backend="cuda", cache_dir=cache, baselines=["eager", "compile"]
    )
    with shared(cfg, build_ahead=False) as ev:  # one run: the steps on this problem share its reference job
        for label, name, backend, expected in STEPS:
            v = ev.submit(Submission(problem, (CANDIDATES / name).read_text(), backend)).verdict()
            rows.append(row(label, v, expected))
            print(f"{label}: {v.status.value} {v.rule} {v.message[:200]} ({v.seconds:.1f} s)", flush=True)
    a, b = rows[3]["median_ms"], rows[4]["median_ms"]
    data = {
        "date": utc_now(),
        "machine": environment(),
        "problem": f"{problem.key} preset {args.preset}",
        "steps": rows,
        "repeatability_rel_diff": abs(a - b) / ((a + b) / 2) if a and b else float("nan"),
        "all_expected": all(r["expected"] for r in rows),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "result.json").write_text(json.dumps(data, indent=2, default=str))
    (args.out / "result.md").write_text(markdown(data))
    print(markdown(data))


if __name__ == "__main__":
    main()
