"""Four verdicts over two problems whose report numbers the tests compute by hand, under both protocols."""

from __future__ import annotations

from pathlib import Path

from kbench.store import Store, VerdictKey
from kbench.types import BuildResult, Problem, Status, TimingStats, Verdict

P1, P2 = "kbench:1/1", "kbench:2/1"
HW = {"gpu": "NVIDIA H200", "torch": "2.13.0", "device": "cuda"}


def _t(median: float, mean: float, rse: float = 0.0) -> TimingStats:
    return TimingStats(median, mean, 0.0, 0.0, median, 100, rse, device="cuda")


def _ok(key: str, cand: TimingStats, *base: tuple[str, TimingStats]) -> Verdict:
    return Verdict(Status.OK, key, "cuda", "full", "fp32", "cuda", timing=cand, baselines=base)


# P1 sample 0: median speedup 2.0 (rse 0.1 %: fast at 1, uncertain at 2 under kbench's rule), mean
#   speedup 2.2 / 2.0 = 1.1 (upstream's: fast at 1, not at 1.5); vs compile 0.5 (median), 0.25 (mean).
# P1 sample 1: mismatch. P2 sample 0: build error (not compiled). P2 sample 1: median speedup
#   1.0 / 0.8 = 1.25 (fast at 1), mean speedup 1.0 / 1.25 = 0.8 (not fast at 1); no compile baseline.
VERDICTS = {
    (P1, 0): _ok(P1, _t(1.0, 2.0, 0.001), ("eager", _t(2.0, 2.2, 0.001)), ("compile", _t(0.5, 0.5))),
    (P1, 1): Verdict(Status.MISMATCH, P1, "cuda", "full", "fp32", "cuda", message="seed 0: 3 of 8 differ"),
    (P2, 0): Verdict(
        Status.BUILD_ERROR, P2, "cuda", "full", "fp32", "cuda", build=BuildResult(False, "cuda", log="x")
    ),
    (P2, 1): _ok(P2, _t(0.8, 1.25), ("eager", _t(1.0, 1.0))),
}


def store_of(path: Path, protocol: str = "kbench") -> tuple[Store, str]:
    store = Store(path)
    store.put_problems([Problem("kbench", 1, 1, "A", ""), Problem("kbench", 2, 1, "B", "")])
    config = {"model": "m", "samples": 2, "turns": 1, "protocol": protocol, "seeds": 5, "dtype": "fp32"}
    run = store.start_run(config, HW, f"hand-{protocol}")
    store.put_run_problems(run, [P1, P2])
    for (key, sample), v in VERDICTS.items():
        store.record(run, VerdictKey(key, sample, 0, "cuda", "m"), v, "class ModelNew: ...")
    return store, run
