"""What a long-lived warm starter preloads, and what it costs, with and without a torch.compile baseline.

    python benchmarks/starter_preloads.py --out OUT/starter-preloads.md [--device cpu] [--repeats 3]

For each set of baselines (`eager`; `eager,compile`), in a process of its own (so each starts its own
starter): an Evaluator opened as a run opens it (benchmarks/engine.py `shared`: one starter for all its
verdicts) judges the honest candidate of problem 2/1 `--repeats` times, then waits until its starter has
been idle for `--idle-s` seconds (the starter preloads only while no request waits). Reported: the
modules the starter preloaded (sandbox/zygote.py: those the workers it forked named, ForkRequest.preload),
the starter's own CPU seconds (user + system, from /proc) and the verdicts' median seconds. The first
verdict of each process builds the candidate and runs the reference into a cache of its own; both
processes share nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, add_record_argument, record_markdown, utc_now, write_report
from engine import shared

SETS = ("eager", "eager,compile")
CANDIDATE = "tests/fixtures/eval/cpp_honest.py"  # problem 2/1's honest C++ candidate


def starter_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child(baselines: str, repeats: int, idle_s: float, device: str) -> dict[str, object]:
    """One process's Evaluator, its verdicts and its starter's account."""
    from kbench.api import Submission
    from kbench.config import RunConfig
    from kbench.sandbox import starter
    from kbench.selftest.runner import fixture_text

    cache = Path(tempfile.mkdtemp(prefix="kbench-preloads-"))
    cfg = RunConfig(preset="small", device=device, backend="cpp", cache_dir=cache, static_checks=False,
                    baselines=baselines.split(","), timing_budget_s=0.5)  # fmt: skip
    job = Submission("kbench:2/1", fixture_text(ROOT / CANDIDATE), "cpp")
    seconds = []
    with shared(cfg) as ev:
        for _ in range(repeats):
            v = ev.submit(job).verdict()
            assert v.ok, v.message + v.log_tail
            seconds.append(v.seconds)
        (found,) = [s for s in starter._starters.values() if s.alive()]
        time.sleep(idle_s)
        return {
            "baselines": baselines,
            "preloaded": list(found.preloaded),
            "starter_cpu_s": round(starter_cpu_s(found.proc.pid), 2),
            "verdict_s": round(statistics.median(seconds), 2),
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--idle-s", type=float, default=8.0, help="the starter's idle time after the verdicts")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    add_record_argument(ap)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.repeats, args.idle_s, args.device)))
        return 0
    rows = []
    for baselines in SETS:
        argv = [*sys.argv, "--child", baselines]
        done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"{baselines}: {done.stderr[-3000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    lines = [
        f"# Warm starter preloads, {args.device} ({utc_now()})", "",
        f"An Evaluator per set of baselines, in a process of its own, judged the honest C++ candidate of "
        f"problem 2/1 {args.repeats} times (small preset), then its starter stayed idle {args.idle_s:g} s. "
        "The starter preloads what the workers it forked said they import: without a compile baseline "
        "it never imports torch._dynamo.", "",
        "| baselines | preloaded by the starter | starter CPU s | verdict s (median) |", "|---|---|---|---|",
        *[f"| {r['baselines']} | {', '.join(r['preloaded']) or '-'} | {r['starter_cpu_s']} | {r['verdict_s']} |"
          for r in rows],
    ]  # fmt: skip
    write_report(args.out, lines)
    metrics = {f"starter_cpu_s_{r['baselines'].replace(',', '_')}": r["starter_cpu_s"] for r in rows}
    record_markdown(args.record, "starter-preloads", "\n".join(lines), metrics=metrics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
