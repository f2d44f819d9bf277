"""Benchmark the shipped level-2 solutions on a GPU against eager PyTorch and torch.compile.

    python benchmarks/solutions.py --out OUT [--record]

Three phases; a failing solution is recorded and the run goes on:
1. warm-up, in parallel subprocesses (one per job, each with a hard timeout): build every CUDA solution
   (through kbench's content-addressed build cache, with the evaluator's cheaper header recipes), run every
   Triton solution once (Triton's disk cache) and torch.compile every reference once (Inductor's disk
   cache). CUDA builds are the long pole and start first.
2. timing, one subprocess per batch (baseline, cuda, triton; benchmarks/solutions_worker.py), problems in
   order; each result is appended to OUT/BATCH.jsonl as soon as it exists, so a crash loses one problem:
   the batch is restarted after it. All modes use kbench.timing.time_callable (CUDA events, L2 flush,
   warm-up, >= 50 calls, a per-mode budget).
3. report: OUT/results.json, OUT/solutions.md (a row per problem and a summary) and a printed summary with
   the geometric-mean speedups over eager of each backend, of the best solution per problem and of
   torch.compile on the same problems; each solution's max error next to fp32 eager's, both against an fp64
   run of the reference; and, where the best solution does not beat torch.compile, the row says why in
   speed-of-light terms.

A run stopped part-way resumes into the same OUT: the warm-up and the batches skip every problem that
already has a row (copy a committed run's JSONL files into OUT to time only what it left out).
`--report-only` rebuilds step 3 from the JSONL files already in OUT. `--device cpu --preset small` (with
TRITON_INTERPRET=1) dry-runs the whole pipeline without a GPU; its timings mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import common
from solutions_report import build_table, machine, markdown, summarize
from solutions_worker import BACKENDS, BATCHES, CACHE, ROOT, parse_ids, solution_path

WORKER = Path(__file__).resolve().parent / "solutions_worker.py"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TORCH_EXTENSIONS_DIR", str(CACHE / "torch_extensions"))
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(CACHE / "inductor"))
    env.setdefault("TRITON_CACHE_DIR", str(CACHE / "triton"))
    env.setdefault("MAX_JOBS", "2")  # one .cu and one .cpp per extension
    # the warm-up runs --jobs compiles at once: one Inductor compile worker each, not a pool per process
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _common(args: argparse.Namespace) -> list[str]:
    return [
        "--out",
        args.out,
        "--device",
        args.device,
        "--preset",
        args.preset,
        "--budget-s",
        str(args.budget_s),
    ]


def _sub(argv: list[str], env: dict[str, str], timeout_s: float, log: Path) -> int:
    with log.open("a") as fh:
        try:
            cmd = [sys.executable, str(WORKER), *argv]
            return subprocess.run(
                cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s
            ).returncode
        except subprocess.TimeoutExpired:
            fh.write(f"\n[timeout after {timeout_s} s]\n")
            return -9


def phase_warm(args: argparse.Namespace, ids: list[int], env: dict[str, str]) -> dict[str, Any]:
    """Warm what the batches still have to time: a problem with a row in OUT/BATCH.jsonl is skipped (the
    batch resumes after it), so a run resumed into the same OUT warms only what is left."""
    out = Path(args.out)
    timed = {b: read_rows(out / f"{b}.jsonl") for b in ["baseline", *args.backends]}
    jobs = [f"{b}:{i}" for b in args.backends for i in ids if solution_path(b, i) and i not in timed[b]]
    jobs += [] if args.no_compile else [f"compile:{i}" for i in ids if i not in timed["baseline"]]
    jobs.sort(key=lambda j: not j.startswith("cuda"))  # CUDA builds are the long pole: start them first
    logs = Path(args.out) / "logs"

    def one(job: str) -> tuple[str, int, float]:
        t0 = time.perf_counter()
        log = logs / f"warm_{job.replace(':', '_')}.log"
        rc = _sub(["--warm", job, *_common(args)], env, args.warm_timeout_s, log)
        return job, rc, round(time.perf_counter() - t0, 1)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        done = list(pool.map(one, jobs))
    failed = sorted(job for job, rc, _ in done if rc != 0)
    print(f"warm-up: {len(jobs)} jobs, {len(failed)} failed: {failed}", flush=True)
    return {job: {"rc": rc, "seconds": s} for job, rc, s in done}


def read_rows(path: Path) -> dict[int, dict[str, Any]]:
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["problem"]: r for r in rows}


def phase_time(args: argparse.Namespace, batch: str, ids: list[int], env: dict[str, str]) -> None:
    """Run one batch; if its process dies mid-problem, record that problem as crashed and resume after it."""
    path = Path(args.out) / f"{batch}.jsonl"
    deadline = time.monotonic() + args.batch_timeout_s
    while True:
        todo = [i for i in ids if i not in read_rows(path)]
        left = deadline - time.monotonic()
        if not todo or left <= 0:
            break
        argv = ["--batch", batch, "--problems", ",".join(map(str, todo)), *_common(args)]
        rc = _sub(
            argv + (["--no-compile"] if args.no_compile else []),
            env,
            left,
            Path(args.out) / "logs" / f"{batch}.log",
        )
        if rc == 0:
            break
        crashed = [i for i in todo if i not in read_rows(path)][:1]
        with path.open("a") as fh:
            for i in crashed:
                fh.write(
                    json.dumps({"problem": i, "status": "crashed", "error": f"worker exit code {rc}"}) + "\n"
                )


def report(args: argparse.Namespace, ids: list[int], extra: dict[str, Any]) -> None:
    out = Path(args.out)
    rows = {b: read_rows(out / f"{b}.jsonl") for b in ["baseline", *args.backends]}
    table = build_table(ids, rows)
    summary = summarize(table, args.backends)
    meta = {**_machine(out), "preset": args.preset, "device": args.device, **extra}
    (out / "results.json").write_text(
        json.dumps({"meta": meta, "summary": summary, "table": table}, indent=1)
    )
    (out / "solutions.md").write_text(markdown(table, summary, args.backends, meta))
    raw = [out / "results.json", *(out / f"{b}.jsonl" for b in ["baseline", *args.backends])]
    common.record_markdown(args.record, "solutions", (out / "solutions.md").read_text(), artifacts=raw)
    print(json.dumps({"summary": summary, "seconds": meta.get("seconds")}, indent=1))


def _machine(out: Path) -> dict[str, Any]:
    """The timing machine, kept in OUT/machine.json by the first invocation that times, so a run resumed
    by later invocations (--no-warm) or reported elsewhere (--report-only) keeps where and when it ran."""
    path = out / "machine.json"
    if not path.exists():
        path.write_text(json.dumps(machine(), indent=1))
    return json.loads(path.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--problems", default="", help="level-2 ids, e.g. 1-36,40 (default: the whole level)")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument(
        "--budget-s", type=float, default=0.3, help="timing budget per mode and problem (>= 50 calls)"
    )
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--warm-timeout-s", type=float, default=240.0)
    ap.add_argument(
        "--batch-timeout-s", type=float, default=900.0, help="cap per batch (~1.5 s a problem expected)"
    )
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--preset", default="full")
    ap.add_argument("--report-only", action="store_true", help="rebuild the report from OUT/*.jsonl")
    ap.add_argument("--warm-only", action="store_true", help="phase 1 only: fill the build/compile caches")
    ap.add_argument(
        "--no-warm",
        action="store_true",
        help="skip phase 1 (caches filled by an earlier --warm-only); batches resume after the rows in OUT",
    )
    common.add_record_argument(ap)
    args = ap.parse_args()
    args.backends = [b for b in args.backends.split(",") if b]
    unknown = [b for b in args.backends if b not in BATCHES]  # its jobs would exit 2, read as "crashed"
    if unknown:
        ap.error(
            f"--backends: {', '.join(unknown)} not a GPU backend registered here ({', '.join(BATCHES[1:])})"
        )
    ids, out = parse_ids(args.problems), Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    if args.report_only:
        return report(args, ids, {})
    env, t0 = _env(), time.perf_counter()
    warmed = {} if args.no_warm else phase_warm(args, ids, env)
    if args.warm_only:
        print(json.dumps({"warm_failed": [j for j, w in warmed.items() if w["rc"]]}))
        return None
    _machine(out)
    for batch in ["baseline", *args.backends]:
        phase_time(args, batch, ids, env)
    report(
        args,
        ids,
        {
            "seconds": round(time.perf_counter() - t0, 1),
            "warm_failed": [j for j, w in warmed.items() if w["rc"]],
        },
    )


if __name__ == "__main__":
    main()
