"""The CPU referee's sampling: what it costs the calls it samples, and what it leaves a candidate that feels it.

    python benchmarks/sampling_overhead.py --out OUT/sampling-overhead.md [--repeats 3]

1. Cost: three PyTorch calls (a 64x256 linear + ReLU, a softmax over 256x1024, a 64x256 add) in batches
   of about 20 ms (the CPU loop's batch), unsampled and sampled by a watch of every batch
   (referee/perfshare.py) at several periods: the median per-call time over 20 batches and its ratio.
2. The attack: `benchmarks/candidates/cpp_feels_sampling.py` (PyTorch whenever a probe loop finds no
   sampling, its kernel otherwise) and the honest candidate, judged one by one on problem 2/1 (`small`,
   cpp) by a `kbench.api.Evaluator` opened as `kbench eval` opens it (benchmarks/engine.py),
   with every timed batch sampled (kbench's rule) and with only batches drawn among the timed ones sampled
   (the rule before it): status, the candidate's and eager's median ms, and the timed calls' kernel share.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from common import ROOT, utc_now, write_report

if TYPE_CHECKING:
    from kbench.types import Verdict

OPS = {"linear+relu 64x256": "lin", "softmax 256x1024": "soft", "add 64x256": "add"}
PERIODS_US = (50, 200, 500, 1000)


def cost(batches: int = 20) -> list[list[object]]:
    import torch

    from kbench.referee import perfshare

    torch.set_num_threads(1)
    x, y, lin = torch.randn(64, 256), torch.randn(256, 1024), torch.nn.Linear(256, 256)
    calls = {"lin": lambda: torch.relu(lin(x)), "soft": lambda: torch.softmax(y, -1), "add": lambda: x + 1}

    def per_call(fn: object, n: int) -> float:
        t = time.perf_counter_ns()
        for _ in range(n):
            fn()  # type: ignore[operator]
        return (time.perf_counter_ns() - t) / n / 1e3

    rows: list[list[object]] = []
    with torch.no_grad():
        for label, key in OPS.items():
            fn = calls[key]
            n = max(1, round(20_000 / per_call(fn, 50)))  # calls of a 20 ms batch
            plain = statistics.median(per_call(fn, n) for _ in range(batches))
            row: list[object] = [label, n, round(plain, 1)]
            for period in PERIODS_US:
                watch = perfshare.Watch(
                    [os.getpid()], period * 1000, lambda p: False, 0, 1.0, every=True, keep=False
                )
                times = []
                for _ in range(batches):
                    with watch:
                        times.append(per_call(fn, n))
                watch.close()
                row.append(f"{statistics.median(times) / plain:.2f}")
            rows.append(row)
    return rows


def attack(repeats: int, cache: Path) -> list[list[object]]:
    from engine import one_by_one

    from kbench.api import Submission
    from kbench.config import RunConfig
    from kbench.evaluate import plan
    from kbench.problems import get_problem
    from kbench.types import CPU_SAMPLE_PERIOD_NS

    fixtures = ROOT / "tests/fixtures/eval"
    shared = (fixtures / "_cpp_ext.py").read_text()
    problem = get_problem("kbench:2/1")
    cfg = RunConfig(preset="small", device="cpu", backend="cpp", cache_dir=cache, baselines=["eager"],
                    static_checks=False, reuse_baselines=False)  # fmt: skip
    rows: list[list[object]] = []
    # the Evaluator's evaluations run in this process: each one's plan reads the period set here
    with one_by_one(cfg) as ev:
        for rule, period in (("every timed batch", CPU_SAMPLE_PERIOD_NS), ("drawn batches (before)", 0)):
            plan.CPU_SAMPLE_PERIOD_NS = period  # what the plan gives the reference's and candidate's loops
            for name, path in (("cpp_feels_sampling", ROOT / "benchmarks/candidates/cpp_feels_sampling.py"),
                               ("cpp_honest", fixtures / "cpp_honest.py")):  # fmt: skip
                source = shared + path.read_text()
                for _ in range(repeats):
                    rows.append(_row(rule, name, ev.submit(Submission(problem, source, "cpp")).verdict()))
                    print(" | ".join(map(str, rows[-1])), flush=True)
    plan.CPU_SAMPLE_PERIOD_NS = CPU_SAMPLE_PERIOD_NS
    return rows


def _row(rule: str, name: str, v: Verdict) -> list[object]:
    loop = v.timing.loop if v.timing else None
    eager = v.baseline("eager")
    return [
        rule, name, v.status.value,
        round(v.timing.median_ms, 4) if v.timing else "-", round(eager.median_ms, 4) if eager else "-",
        f"{v.speedup('eager'):.2f}" if v.speedup("eager") else "-",
        "-" if v.kernel_share is None else f"{v.kernel_share:.2f}",
        "-" if loop is None or loop.timed_kernel_share is None
        else f"{loop.timed_kernel_share:.2f} ({loop.timed_share_samples})",
    ]  # fmt: skip


def main() -> int:
    from kbench.hardware import environment

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    costs = cost()
    attacks = attack(args.repeats, Path(os.environ.get("KBENCH_CACHE_DIR") or tempfile.mkdtemp()))
    env = environment()
    lines = [
        f"# Sampling overhead, cpu ({utc_now()})", "",
        f"kbench {env.get('kbench')}, torch {env.get('torch')}, python {env.get('python')}, "
        f"{env.get('cpu')} x {env.get('cpu_count')}", "",
        "Cost: median per-call time of 20 batches of about 20 ms, sampled at each period over unsampled.", "",
        "| call | calls a batch | unsampled us | " + " | ".join(f"{p} us" for p in PERIODS_US) + " |",
        "|---|---|---|" + "---|" * len(PERIODS_US),
        *["| " + " | ".join(map(str, r)) + " |" for r in costs], "",
        f"The attack, {args.repeats} evaluations each (problem 2/1, small, cpp; the eager baseline timed under the same rule):", "",
        "| sampled | candidate | status | candidate ms | eager ms | speedup | kernel share | timed share (samples) |",
        "|---|---|---|---|---|---|---|---|",
        *["| " + " | ".join(map(str, r)) + " |" for r in attacks], "",
    ]  # fmt: skip
    write_report(args.out, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
