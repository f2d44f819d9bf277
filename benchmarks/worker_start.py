"""Worker start cost: a new interpreter per job (`spawn`) against a fork of the warm starter (`fork`).

    python benchmarks/worker_start.py --out OUT/worker-start.md [--device cuda]

1. Bare start: a worker module that imports torch and kbench's worker, reads its key and exits, through
   sandbox.host.run_worker: wall seconds from the call to its return, median of `--repeats`.
2. Whole verdicts: an honest candidate (cpp on the CPU, Triton on a GPU) judged one by one by a
   `kbench.api.Evaluator` opened as `kbench eval` opens it (benchmarks/engine.py) with `worker_start` set to
   the mode, the build and reference caches warm, `measure=False`: median verdict seconds and the workers'
   wall time, per mode.
The starter's own start (one torch import) is paid once per process and is left out of both (one
warm-up run per mode first).
3. Evaluators opened one after the other in one process (a trainer's episode, a notebook cell), each
   judging one candidate (`fork`) and closing: the verdict's seconds and its wait for a starter, with
   `close()` (an idle starter stays for the next Evaluator) against `close(cancel=True)` (the starter ends
   with the Evaluator, as every last close did before).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from common import ROOT, add_record_argument, record_markdown, utc_now, write_report
from engine import one_by_one

from kbench.api import Submission
from kbench.config import RunConfig
from kbench.hardware import environment
from kbench.sandbox.host import run_worker
from kbench.sandbox.protocol import JobSpec
from kbench.selftest.runner import fixture_text
from kbench.types import Problem as ProblemSpec

BARE = (
    "import torch\nimport kbench.worker.candidate\nfrom kbench.sandbox.protocol import read_key\nread_key()\n"
)
CANDIDATES = {"cpu": ("cpp", "tests/fixtures/eval/cpp_honest.py"), "cuda": ("triton", "benchmarks/candidates/triton_gemm_relu.py")}  # fmt: skip


def bare(mode: str, repeats: int, folder: Path, device: str) -> list[float]:
    (folder / "bareworker.py").write_text(BARE)
    spec = JobSpec(role="candidate", problem=ProblemSpec(source="t", level=0, number=0, name="t", code=""),
                   preset="small", dtype="fp32", device="cpu" if device == "cpu" else "cuda")  # fmt: skip
    env = {"PYTHONPATH": f"{folder}:{ROOT / 'src'}"}
    times = []
    for i in range(repeats + 1):
        t0 = time.monotonic()
        exit_ = run_worker("bareworker", folder / f"job-{mode}-{i}", spec, 60.0, env=env, start=mode)
        assert exit_.returncode == 0, exit_.log_tail
        if i:  # the first one starts the starter (fork) or warms the page cache (spawn)
            times.append(time.monotonic() - t0)
    return times


def verdicts(
    mode: Literal["fork", "spawn"], repeats: int, cache: Path, device: str
) -> tuple[list[float], list[float]]:
    cfg, job = _job(mode, cache, device)
    totals, workers = [], []
    with one_by_one(cfg) as ev:
        for i in range(repeats + 1):
            v = ev.submit(job).verdict()
            assert v.ok, v.message + v.log_tail
            if i:
                phases = dict(v.phases)
                totals.append(v.seconds)
                workers.append(phases.get("ref:worker", 0.0) + phases.get("cand:worker", 0.0))
    return totals, workers


def reopened(keep: bool, repeats: int, cache: Path, device: str) -> tuple[list[float], list[float]]:
    """Each reopened Evaluator's verdict seconds and its reference worker's wait for a starter."""
    cfg, job = _job("fork", cache, device)
    totals, waits = [], []
    for i in range(repeats + 1):
        ev = one_by_one(cfg)
        try:
            v = ev.submit(job).verdict()
        finally:
            ev.close(cancel=not keep)
        assert v.ok, v.message + v.log_tail
        if i:  # the first one warms the caches and starts the first starter
            totals.append(v.seconds)
            waits.append(dict(v.phases).get("ref:starter", 0.0))
    return totals, waits


def _job(mode: Literal["fork", "spawn"], cache: Path, device: str) -> tuple[RunConfig, Submission]:
    """The config verdicts are judged with (warm caches, `measure=False`) and the honest candidate."""
    backend, path = CANDIDATES[device]
    cfg = RunConfig(preset="small" if device == "cpu" else "full", device=device, backend=backend,
                    cache_dir=cache, measure=False, static_checks=False, worker_start=mode)  # fmt: skip
    return cfg, Submission("kbench:2/1", fixture_text(ROOT / path), backend)  # with its `# include:`


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=5)
    add_record_argument(ap)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kbench-start-"))
    rows = []
    modes: tuple[Literal["fork", "spawn"], ...] = ("spawn", "fork")
    for mode in modes:
        b = bare(mode, args.repeats, folder, args.device)
        t, w = verdicts(mode, args.repeats, folder / "cache", args.device)
        rows.append((mode, statistics.median(b), statistics.median(t), statistics.median(w)))
        print(
            f"{mode}: bare start {statistics.median(b):.3f} s, verdict {statistics.median(t):.2f} s",
            flush=True,
        )
    again = []
    for keep in (False, True):
        t, w = reopened(keep, args.repeats, folder / "cache", args.device)
        again.append(("stays (close())" if keep else "ends (close(cancel=True))", t, w))
        print(f"reopened, starter kept={keep}: verdict {statistics.median(t):.2f} s", flush=True)
    env = environment()
    lines = [
        f"# Worker start, {args.device} ({utc_now()})", "",
        f"kbench {env.get('kbench')}, torch {env.get('torch')}, python {env.get('python')}, "
        f"{env.get('cpu')} x {env.get('cpu_count')}, gpu {env.get('gpu')}", "",
        f"Medians of {args.repeats} runs after one warm-up per mode. Bare start: a worker that imports "
        "torch and kbench's worker and exits. Verdict: an honest candidate on problem 2/1 judged as "
        "`kbench eval` judges, with warm build and reference caches and `measure=False` (two workers: "
        "reference and candidate).", "",
        "| start | bare worker s | verdict s | reference + candidate worker wall s |", "|---|---|---|---|",
        *[f"| {m} | {b:.3f} | {t:.2f} | {w:.2f} |" for m, b, t, w in rows], "",
        f"Evaluators opened one after the other in one process, each judging one candidate (`fork`) "
        f"and closing; medians of {args.repeats} after one warm-up.", "",
        "| a closed Evaluator's idle starter | verdict s | its reference's wait for a starter s |",
        "|---|---|---|",
        *[f"| {name} | {statistics.median(t):.2f} | {statistics.median(w):.2f} |" for name, t, w in again],
        "",
    ]  # fmt: skip
    write_report(args.out, lines)
    record_markdown(args.record, "worker-start", "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
