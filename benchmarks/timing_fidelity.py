"""Timing fidelity: is kbench's reported time repeatable run to run, and does it agree with the profiler?

    python benchmarks/timing_fidelity.py --out OUT --max-seconds 540

For the first `--problems` level-2 problems of the embedded suite that ship a solution for `--backend`:
1. prebuild every solution in parallel (kbench.evaluate.prebuild, `--jobs` at a time): cold CUDA builds
   are the slow part, and a build must not land inside a timed round;
2. two rounds per problem; a round is what `evaluate` does for timing: a fresh reference worker (eager
   baseline only) and a fresh candidate worker, both timing with kbench.timing.time_callable. The
   reference's disk cache is removed before every reference job, so each round re-times in a new
   process (the build cache is kept: it holds binaries, not timings);
3. (GPU) torch.profiler's device-kernel time per call of each timed solution in one extra process
   (timing_fidelity_profile.py), and with `--ncu`, Nsight Compute's gpu__time_duration.sum
   (`--clock-control none`) for the first `--ncu-count` single-kernel solutions.
Every timing is appended to OUT/timing_fidelity.jsonl as it ends; OUT/timing_fidelity.md holds the
tables. `--max-seconds` caps the run: no problem starts when the remaining time (less a reserve for
step 3) is below the slowest problem so far; the report covers what finished. `--report-only` rebuilds
the report from the JSONL. On the CPU (`--device cpu --backend cpp --preset small`) step 3 is skipped.

A problem costs ~4 worker processes (~15-25 s on an H200 host), so 30 problems need ~10 minutes; to
split a run under a shorter cap, give each call `--skip K --problems N`, concatenate the JSONL files
into one folder and run `--report-only` there. `--cache-dir` may point at another run's kbench cache:
its builds are reused, its reference timings are not touched.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from common import utc_now
from timing_fidelity_report import build_table, markdown, read_rows, summarize

from kbench.config import RunConfig, job_prefix, scratch_root
from kbench.errors import KbenchError
from kbench.evaluate.candidate_run import run_candidate
from kbench.evaluate.judge import check_outputs
from kbench.evaluate.plan import evaluation_device as resolve_device
from kbench.evaluate.plan import make_plan
from kbench.evaluate.prebuild import candidate_env, prebuild
from kbench.evaluate.reference_run import get_reference as run_reference
from kbench.hardware import environment
from kbench.problems import select
from kbench.solutions import shipped_candidate as reference_candidate
from kbench.types import Candidate, LoopFacts, Problem, Status, TimingStats

PROFILE_WORKER = Path(__file__).resolve().parent / "timing_fidelity_profile.py"
ROWS = "timing_fidelity.jsonl"
REPORT_S = 5.0  # kept at the end for the report


class Run:
    """The run's settings, its deadline and its JSONL file."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.rows = self.out / ROWS
        self.deadline = time.monotonic() + args.max_seconds
        self.device = resolve_device(args.device, args.backend)
        self.private = private_cache(Path(args.cache_dir))
        self.cfg = RunConfig(
            preset=args.preset,
            device=self.device,
            backend=args.backend,
            cache_dir=self.private,
            baselines=["eager"],  # torch.compile's baselines cost minutes; eager is what is compared
            **({"timing_budget_s": args.budget_s} if args.budget_s else {}),
            **({"timing_batch_ms": args.batch_ms} if args.batch_ms else {}),
        )
        self.notes: list[str] = []
        self.ncu_reserve = 0.0  # seconds kept for the Nsight Compute step

    def note(self, text: str) -> None:
        """A remark for the report, kept in the JSONL too so `--report-only` shows it."""
        self.notes.append(text)
        self.write({"kind": "note", "text": text})

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def write(self, row: dict[str, Any]) -> None:
        with self.rows.open("a") as fh:
            fh.write(json.dumps(row, default=str) + "\n")


def private_cache(shared: Path) -> Path:
    """A cache folder of this run whose `builds` is the shared build cache (binaries, reused) and whose
    `reference` (timings) is its own, removed before each reference job; a shared `--cache-dir` such
    as another run's keeps its reference cache."""
    (shared / "builds").mkdir(parents=True, exist_ok=True)
    private = Path(tempfile.mkdtemp(prefix="kbench-fidelity-run-"))
    (private / "builds").symlink_to((shared / "builds").resolve(), target_is_directory=True)
    return private


def drop_private(private: Path) -> None:
    (private / "builds").unlink()  # the link only: the shared builds stay
    shutil.rmtree(private, ignore_errors=True)


def problems(backend: str, count: int, first: tuple[int, ...] = ()) -> list[tuple[Problem, Candidate]]:
    """The first `count` level-2 problems with a solution; those numbered in `first` lead, in that order."""
    chosen = []
    rank = {n: i for i, n in enumerate(first)}
    for p in sorted(select(level=2), key=lambda p: (rank.get(p.number, len(rank)), p.number)):
        cand = reference_candidate(p, backend)
        if cand is not None:
            chosen.append((p, cand))
    return chosen[:count]


def phase_build(run: Run, items: list[tuple[Problem, Candidate]]) -> None:
    # A build job's limit: the time left less a third for the rounds, so a hung build cannot eat the run.
    cfg = run.cfg.model_copy(update={"timeout_s": max(60.0, min(run.cfg.timeout_s, run.left() * 0.66))})

    def one(item: tuple[Problem, Candidate]) -> dict[str, Any]:
        problem, cand = item
        res = prebuild(cand, cfg, run.device, batch=len(items))
        return {
            "kind": "build",
            "problem": problem.key,
            "ok": res.ok,
            "seconds": res.seconds,
            "cache_hit": res.cache_hit,
            "recipe": res.recipe,
            "log": "" if res.ok else res.log[-1500:],
        }

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, run.args.jobs)) as pool:
        for row in pool.map(one, items):
            run.write(row)
            if not row["ok"]:
                print(f"build failed: {row['problem']}: {row['log'][-300:]}", flush=True)
    run.note(f"prebuild of {len(items)} solutions: {time.perf_counter() - t0:.0f} s")


def timing_row(problem: Problem, rnd: int, role: str, timing: TimingStats | None, wall: float) -> dict:
    row: dict[str, Any] = {"kind": "timing", "problem": problem.key, "round": rnd, "role": role}
    row["wall_s"] = round(wall, 3)
    if timing is None:
        return row | {"status": "no timing"}
    loop, clock = timing.loop or LoopFacts(), timing.clock
    return row | {
        "status": "ok",
        "median_ms": timing.median_ms,
        "mean_ms": timing.mean_ms,
        "min_ms": timing.min_ms,
        "rse": timing.rse,
        "n": timing.n,
        "method": timing.method,
        "timing_loop_s": loop.wall_s,
        "clocks_moved": clock.clocks_moved if clock else None,
        "sm_clock_mhz": list(clock.sm_clock_mhz) if clock else None,
        "temp_c": list(clock.temp_c) if clock else None,
        "clock_limits": list(clock.clock_limits) if clock else None,
        "batch": loop.batch,
        "split_ms": dict(loop.split_ms),  # per batch: where the referee's clock went
        "copier_ms": loop.copy_ms,
        "overhead_ms": loop.overhead_ms,
    }


def one_round(run: Run, problem: Problem, cand: Candidate, rnd: int) -> None:
    """What `evaluate` runs for one verdict's times: one plan, a reference job, a candidate job."""
    cfg = run.cfg
    plan = make_plan(cfg, run.device)
    shutil.rmtree(cfg.cache_dir / "reference", ignore_errors=True)  # a cache hit would not re-time
    with tempfile.TemporaryDirectory(prefix=job_prefix(), dir=scratch_root(cfg)) as tmp:
        workdir = Path(tmp)
        t0 = time.perf_counter()
        try:
            ref = run_reference(problem, cfg, plan, workdir)
        except KbenchError as exc:
            run.write(
                timing_row(problem, rnd, "reference", None, time.perf_counter() - t0) | {"error": str(exc)}
            )
            return
        assert not ref.cache_hit, "the reference cache was reused"
        row = timing_row(problem, rnd, "reference", ref.timings.get("eager"), time.perf_counter() - t0)
        # the correctness outputs: their forward passes, then (once the lease is given back) their files
        outputs_s = ref.phases.get("outputs", 0.0) + ref.phases.get("write", 0.0)
        run.write(row | {"outputs_s": round(outputs_s, 3)})
        t0 = time.perf_counter()
        # A hung candidate must not outlive --max-seconds by its 300 s default limit.
        capped = cfg.model_copy(update={"timeout_s": max(30.0, min(cfg.timeout_s, run.left()))})
        outcome = run_candidate(problem, cand, capped, plan, workdir)
        wall = time.perf_counter() - t0
        result = outcome.result
        row = timing_row(problem, rnd, "candidate", result.timing if result else None, wall)
        if outcome.status is Status.OK:
            tol = problem.tol(cfg.dtype)
            checked = check_outputs(
                outcome, workdir / "candidate", ref, plan.fixed + plan.secret, run.device, tol
            )
            row["correct"] = checked.status is Status.OK
            row["phases"] = result.phases if result else {}  # where a slow worker's seconds went
        else:
            row |= {"status": outcome.status.value, "error": outcome.message[:500]}
        run.write(row)


def phase_rounds(run: Run, items: list[tuple[Problem, Candidate]], reserve: float, per_item: float) -> list:
    """Two rounds per problem while the slowest problem so far still fits before the reserve, which
    grows by `per_item` seconds for every timed problem (its profiler pass)."""
    done: list[tuple[Problem, Candidate]] = []
    slowest = 0.0
    for problem, cand in items:
        if run.left() - reserve - per_item * (len(done) + 1) < slowest:
            run.note(f"time cap: {len(done)} of {len(items)} problems timed (--max-seconds)")
            break
        t0 = time.perf_counter()
        for rnd in (1, 2):
            one_round(run, problem, cand, rnd)
        slowest = max(slowest, time.perf_counter() - t0)
        done.append((problem, cand))
        print(
            f"{problem.key}: 2 rounds in {time.perf_counter() - t0:.1f} s ({run.left():.0f} s left)",
            flush=True,
        )
    return done


def _profile_request(run: Run, items: list[tuple[Problem, Candidate]], calls: int) -> Path:
    from kbench.solutions import solution_paths

    paths = solution_paths(run.args.backend)
    req = {
        "backend": run.args.backend,
        "cache_dir": str(run.cfg.cache_dir),  # its builds/ is the shared build cache
        "preset": run.cfg.preset,
        "dtype": run.cfg.dtype,
        "device": run.device,
        "init_seed": run.cfg.init_seed,
        "calls": calls,
        "out": str(run.rows),
        "items": [{"problem": p.key, "file": str(paths[(p.level, p.number)])} for p, _ in items],
    }
    path = Path(tempfile.mkstemp(prefix="fidelity-req-", suffix=".json", dir=run.cfg.cache_dir)[1])
    path.write_text(json.dumps(req))
    return path


def _sub(cmd: list[str], run: Run, timeout: float, log: Path) -> tuple[int, str]:
    """Run `cmd` with the evaluation workers' build environment (same build keys: cached builds load)."""
    env = os.environ | candidate_env(run.args.backend, run.cfg, run.device)
    with log.open("a") as fh:
        try:
            rc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=max(timeout, 1.0))
            code = rc.returncode
        except subprocess.TimeoutExpired:
            code = -9
            fh.write(f"\n[timed out after {timeout:.0f} s]\n")
    return code, log.read_text()[-2000:]


def phase_profile(run: Run, items: list[tuple[Problem, Candidate]]) -> None:
    if not run.device.startswith("cuda"):
        run.note("profiler agreement skipped: it needs a CUDA device (torch.profiler device kernels)")
        return
    req = _profile_request(run, items, run.args.profile_calls)
    timeout = run.left() - REPORT_S - run.ncu_reserve
    cmd = [sys.executable, str(PROFILE_WORKER), str(req)]
    rc, log = _sub(cmd, run, timeout, run.out / "profile_worker.log")
    if rc != 0:
        run.note(f"profiler worker exit {rc}: {log[-300:]}")


def phase_ncu(run: Run, items: list[tuple[Problem, Candidate]]) -> None:
    if not run.args.ncu or not run.device.startswith("cuda"):
        return
    ncu = shutil.which("ncu")
    if ncu is None:
        run.note("--ncu given but ncu is not on PATH: Nsight Compute agreement skipped")
        return
    from timing_fidelity_profile import ncu_command, parse_ncu_csv

    single = {
        r["problem"]
        for r in read_rows(run.rows.read_text())
        if r.get("kind") == "profile" and r.get("single_kernel")
    }
    for problem, cand in [it for it in items if it[0].key in single][: run.args.ncu_count]:
        if run.left() < REPORT_S + 10:
            run.note("ncu: out of time")
            break
        req = _profile_request(run, [(problem, cand)], run.args.ncu_calls)
        log = run.out / f"ncu_{problem.level}_{problem.number}.csv"
        cmd = ncu_command(ncu, log, [sys.executable, str(PROFILE_WORKER), str(req), "--ncu"])
        timeout = min(run.args.ncu_timeout_s, run.left() - REPORT_S)
        rc, tail = _sub(cmd, run, timeout, run.out / f"ncu_{problem.level}_{problem.number}.log")
        row: dict[str, Any] = {"kind": "ncu", "problem": problem.key, "rc": rc}
        parsed = parse_ncu_csv(log.read_text()) if log.exists() else []
        if parsed:
            import statistics

            row |= {"ncu_ms_median": statistics.median(parsed), "kernels": len(parsed)}
        else:  # ncu's own messages (e.g. ERR_NVGPUCTRPERM) are in its log file, the worker's in tail
            row["error"] = ((log.read_text()[-400:] if log.exists() else "") + "\n" + tail[-400:]).strip()
        run.write(row)


def report(args: argparse.Namespace, notes: list[str]) -> dict[str, Any]:
    out = Path(args.out)
    rows = read_rows((out / ROWS).read_text()) if (out / ROWS).exists() else []
    notes = [r["text"] for r in rows if r.get("kind") == "note"] + notes
    table = build_table(rows)
    summary = summarize(table, rows)
    previous = out / "timing_fidelity_summary.json"
    if args.report_only and previous.exists():  # the measuring machine's facts, not this one's
        meta = json.loads(previous.read_text())["meta"]
        meta["notes"] = notes
    else:
        meta = {
            "date": utc_now(),
            "machine": environment(),
            "device": args.device,
            "backend": args.backend,
            "preset": args.preset,
            "budget_s": args.budget_s or RunConfig().timing_budget_s,
            "batch_ms": args.batch_ms or RunConfig().timing_batch_ms,
            "notes": notes,
        }
    (out / "timing_fidelity.md").write_text(markdown(table, summary, meta))
    (out / "timing_fidelity_summary.json").write_text(
        json.dumps({"meta": meta, "summary": summary}, indent=1)
    )
    return summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--backend", default="cuda", choices=["cuda", "triton", "cpp"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--preset", default="full")
    ap.add_argument("--problems", type=int, default=30, help="the first N level-2 problems with a solution")
    ap.add_argument(
        "--first",
        type=lambda v: tuple(int(x) for x in v.split(",") if x),
        default=(),
        help="level-2 problem numbers to time first, e.g. 23,24 (single-kernel solutions reach the profiler pair)",
    )
    ap.add_argument("--skip", type=int, default=0, help="skip the first N of them (to split a run)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel prebuilds")
    ap.add_argument("--max-seconds", type=float, default=540.0)
    ap.add_argument(
        "--budget-s", type=float, default=None, help="timing budget per callable (kbench default)"
    )
    ap.add_argument(
        "--batch-ms", type=float, default=None, help="the referee's batch length (kbench default)"
    )
    ap.add_argument(
        "--cache-dir",
        default=str(Path(tempfile.gettempdir()) / "kbench-fidelity-cache"),
        help="kbench cache whose builds/ is reused (e.g. another run's); its reference timings are not",
    )
    ap.add_argument("--profile-calls", type=int, default=30)
    ap.add_argument("--ncu", action="store_true", help="also Nsight Compute, if ncu is on PATH")
    ap.add_argument("--ncu-count", type=int, default=3)
    ap.add_argument("--ncu-calls", type=int, default=5)
    ap.add_argument("--ncu-timeout-s", type=float, default=60.0)
    ap.add_argument("--build-only", action="store_true", help="only prebuild (fills --cache-dir)")
    ap.add_argument("--report-only", action="store_true")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.report_only:
        print(json.dumps(report(args, ["report rebuilt from the JSONL (--report-only)"]), indent=1))
        return
    run = Run(args)
    try:
        measure(run, args)
    finally:
        drop_private(run.private)


def measure(run: Run, args: argparse.Namespace) -> None:
    items = problems(args.backend, args.skip + args.problems, args.first)[args.skip :]
    phase_build(run, items)
    if args.build_only:
        print("\n".join(run.notes), flush=True)
        return
    gpu = run.device.startswith("cuda")
    run.ncu_reserve = args.ncu_count * min(args.ncu_timeout_s, 30.0) if gpu and args.ncu else 0.0
    # The profiler pass is one process: ~5-10 s to start, then 1-3 s per solution (making the full
    # preset's inputs and profiling); a starved pass was killed after 3 s on the H200, hence the margin.
    start, per_item = (30.0, 3.0) if gpu else (0.0, 0.0)
    done = phase_rounds(run, items, REPORT_S + start + run.ncu_reserve, per_item)
    phase_profile(run, done)
    phase_ncu(run, done)
    summary = report(args, [])  # the run's notes are in the JSONL
    print(json.dumps(summary, indent=1))
    print(f"wrote {Path(args.out) / 'timing_fidelity.md'}", flush=True)


if __name__ == "__main__":
    main()
