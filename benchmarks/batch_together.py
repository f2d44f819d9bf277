"""The batch-together attack against its honest twin on a tiny problem, both judged through the Evaluator.

    python benchmarks/batch_together.py [--device cuda] [--repeats 3] [--out FILE.jsonl]

`candidates/triton_gelu_batch_together.py` computes each timed batch's calls in one launch (its runner's
Run handler rebound, static checks off); `candidates/triton_gelu_honest.py` launches once per call. Both on
`candidates/tiny_gelu_problem.py` (4 x 256 inputs: a call costs mostly its launch). Each verdict's row holds
its status, its time per call in batches (`median_ms`) and a call's latency alone (`loop.single_call_ms`),
the two numbers a rule against the attack would set against each other (docs/anti-cheat.md). On a CPU the
kernels run in Triton's interpreter: the rows then show only that the path works.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from engine import one_by_one

from kbench.api import Submission
from kbench.config import RunConfig
from kbench.problems.sources import load_source

HERE = Path(__file__).parent / "candidates"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    problem = load_source(str(HERE / "tiny_gelu_problem.py"))[0]
    gpu = args.device == "cuda"
    cfg = RunConfig(device=args.device, backend="triton", preset="full" if gpu else "small",
                    static_checks=False, baselines=["eager"], timing_budget_s=2.0 if gpu else 0.5)  # fmt: skip
    out = args.out.open("w") if args.out else None
    with one_by_one(cfg) as ev:
        for name in ("honest", "batch_together") * args.repeats:
            source = (HERE / f"triton_gelu_{name}.py").read_text()
            v = ev.submit(Submission(problem, source, "triton")).verdict()
            t = v.timing
            loop = t.loop if t is not None else None
            row = {
                "name": name, "status": v.status.value, "rule": v.rule, "message": v.message[:200],
                "median_ms": t.median_ms if t else None, "min_ms": t.min_ms if t else None,
                "single_call_ms": loop.single_call_ms if loop else None,
                "batch": loop.batch if loop else None, "calls": loop.calls if loop else None,
                "eager_ms": dict(v.baselines)["eager"].median_ms if v.baselines else None,
            }  # fmt: skip
            print(json.dumps(row), flush=True)
            if out is not None:
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
