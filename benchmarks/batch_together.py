"""The batch-together attack against its honest twin on a tiny problem, and what honest solutions show of
the two numbers a rule against it sets side by side; all judged through the Evaluator.

    python benchmarks/batch_together.py [--device cuda|cpu] [--backend triton|cpp] [--repeats 3]
                                        [--survey 24] [--out FILE.jsonl]

1. The pair: `candidates/BACKEND_gelu_batch_together.py` (prepended with its honest twin) computes each
   timed batch's calls in one launch or extension call (its runner's Run handler rebound, static checks
   off); `candidates/BACKEND_gelu_honest.py` makes one per call. Both on `candidates/tiny_gelu_problem.py`
   (4 x 256 inputs: a call costs mostly its launch or dispatch). Triton by default on a GPU, C++ on a CPU.
2. The survey (`--survey N`): N shipped Triton level-2 solutions spread over the suite, at `--survey-preset`
   (`small`: tiny inputs, calls that cost mostly their launches, the honest worst case for the rule), each
   with its eager baseline.
Each verdict's row holds its status, its time per call in batches (`median_ms`), a call's latency alone
(`loop.single_call_ms`) and their ratio (`per_call_over_single`), the same for its eager baseline: the
batch-together rule (docs/anti-cheat.md) flags a candidate whose ratio is under a floor that honest calls,
which overlap at most a launch with a kernel, stay above (on a GPU: the rule is off on a CPU, where the
C++ pair shows what the attack gains there). Triton on a CPU runs in its interpreter: its rows show only
that the path works.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, TextIO

from engine import one_by_one, shared, verdicts

from kbench.api import Submission
from kbench.config import RunConfig
from kbench.problems.sources import load_source
from kbench.solutions import solution_paths
from kbench.types import TimingStats, Verdict

HERE = Path(__file__).parent / "candidates"


def _ratio(t: TimingStats | None) -> dict[str, Any]:
    single = t.loop.single_call_ms if t is not None and t.loop is not None else None
    median = t.median_ms if t is not None else None
    ratio = round(median / single, 4) if median and single else None
    return {"median_ms": median, "single_call_ms": single, "per_call_over_single": ratio,
            "batch": t.loop.batch if t is not None and t.loop is not None else None}  # fmt: skip


def _row(kind: str, name: str, v: Verdict) -> dict[str, Any]:
    eager = dict(v.baselines).get("eager") if v.baselines else None
    return {"kind": kind, "name": name, "status": v.status.value, "rule": v.rule, "message": v.message[:200],
            **_ratio(v.timing), "eager": _ratio(eager)}  # fmt: skip


def _emit(row: dict[str, Any], out: TextIO | None) -> None:
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def pair(device: str, backend: str, repeats: int, out: TextIO | None) -> None:
    problem = load_source(str(HERE / "tiny_gelu_problem.py"))[0]
    gpu = device == "cuda"
    cfg = RunConfig(device=device, backend=backend, preset="full" if gpu else "small",
                    static_checks=False, baselines=["eager"], timing_budget_s=2.0 if gpu else 0.5)  # fmt: skip
    honest = (HERE / f"{backend}_gelu_honest.py").read_text()
    patch = (HERE / f"{backend}_gelu_batch_together.py").read_text()
    sources = {"honest": honest, "batch_together": honest + "\n" + patch}
    with one_by_one(cfg) as ev:
        for name in ("honest", "batch_together") * repeats:
            _emit(_row("pair", name, ev.submit(Submission(problem, sources[name], backend)).verdict()), out)


def survey(device: str, count: int, preset: str, max_seconds: float, out: TextIO | None) -> None:
    paths = solution_paths("triton")
    problems = {(p.level, p.number): p for p in load_source("kbench")}
    keys = sorted(k for k in paths if k[0] == 2 and k in problems)
    step = max(1, len(keys) // max(count, 1))
    chosen = keys[::step][:count]
    cfg = RunConfig(device=device, backend="triton", preset=preset, baselines=["eager"])
    with shared(cfg) as ev:
        tickets = [ev.submit(Submission(problems[k], paths[k].read_text(), "triton")) for k in chosen]
        labels = [f"{k[0]}/{k[1]}" for k in chosen]
        for i, v in verdicts(tickets, time.monotonic() + max_seconds, labels):
            _emit(_row("survey", labels[i], v), out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument(
        "--backend", default="", help="the pair's: triton (the default on a GPU) or cpp (on a CPU)"
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--survey", type=int, default=0, help="shipped Triton level-2 solutions to survey")
    ap.add_argument("--survey-preset", default="small")
    ap.add_argument(
        "--max-seconds", type=float, default=400.0, help="the survey's verdicts after this are cut"
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out = args.out.open("w") if args.out else None
    if args.repeats:
        pair(args.device, args.backend or ("triton" if args.device == "cuda" else "cpp"), args.repeats, out)
    if args.survey:
        survey(args.device, args.survey, args.survey_preset, args.max_seconds, out)


if __name__ == "__main__":
    main()
