"""Evaluation throughput on one machine: a batch of distinct level-2 CUDA candidates, cold caches.

    python benchmarks/throughput.py --out OUT [--variants 3] [--solutions N] [--max-seconds 330]

The batch is every shipped CUDA level-2 solution (`--solutions N`: the first N) plus `--variants - 1`
copies of each whose load_inline extension has another name, so every candidate is its own extension and
no build is a cache hit (100 solutions x 3 = 300 candidates; `--limit` takes the first N, variant 0 of
every solution first). `--solutions 36 --variants 3` is the 108-candidate batch of the first records:
three candidates per problem, so a run's later candidates of a problem find its reference kept.
kbench's flow: the local executor with CPU builders (builders make a precompiled header for the batch;
backends/fastbuild.py) ahead of the GPU lanes (several evaluations in flight, their GPU phases taking
turns on the device lease; a lane with nothing built runs the reference of a job still building, unless
`--no-prefetch`), baseline eager only.

Reported: wall time, verdicts per minute, build time per candidate by recipe (cold) and for a cache hit
(warm), the GPU's idle share while verdicts were due (nvidia-smi utilization sampled every 200 ms), the
CPUs' busy share and the share of time a process held the GPU lease, while builds ran and after the last
one (`HostSampler`: which of the two bounds the run), and a warm pass over part of the batch for the per-verdict overhead beyond the timing itself. With
`--standard-sample N`, N candidates are first built the way load_inline builds them (no fast recipe), N
builders at once, for the build cost of the plain flow on the same files.

Writes OUT/throughput.jsonl (each build and verdict as it finishes), then OUT/throughput.json and
OUT/throughput.md after the cold pass and again after the warm one. No evaluation starts after
--max-seconds (the warm pass has --warm-seconds); a run cut there reports what finished.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kbench.api.runner import closed_batch
from kbench.config import RunConfig
from kbench.evaluate.prebuild import prebuild
from kbench.executors import Job
from kbench.executors.local import LocalExecutor, usable_cpus
from kbench.hardware import environment
from kbench.problems.sources import load_source
from kbench.solutions import shipped_candidate as reference_candidate
from kbench.types import BuildResult, Candidate, Verdict

_NAME = re.compile(r"""(load_inline\(\s*name\s*=\s*)(["'])(\w+)\2""")


def variant(source: str, k: int) -> str:
    """The same candidate under another extension name (k = 0: unchanged)."""
    if k == 0:
        return source
    renamed, n = _NAME.subn(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}_v{k}{m.group(2)}", source)
    if n == 0:
        raise ValueError("no load_inline(name=...) to rename")
    return renamed


def batch(variants: int, limit: int, backend: str = "cuda", solutions: int = 0) -> list[Job]:
    """`variants` candidates of each shipped level-2 solution of `backend` (of the first `solutions`
    problems that have one, 0: all), variant 0 of every solution first; the first `limit` (0: all)."""
    shipped = [
        (p, c) for p in load_source("kbench") if p.level == 2 if (c := reference_candidate(p, backend))
    ]
    if solutions:
        shipped = shipped[:solutions]
    jobs: list[Job] = []
    for k in range(variants):
        for p, c in shipped:
            cand = Candidate(p.key, backend, variant(c.source, k), origin=f"{c.origin}#v{k}")
            jobs.append(Job(p, cand, tag=len(jobs)))
    return jobs[:limit] if limit else jobs


class GpuSampler:
    """GPU utilization every 200 ms from nvidia-smi, in a background process."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, int]] = []
        self.proc: subprocess.Popen[str] | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        try:
            self.proc = subprocess.Popen(
                [
                    "nvidia-smi",
                    "--query-gpu=utilization.gpu",
                    "--format=csv,noheader,nounits",
                    "-lms",
                    "200",
                    "-i",
                    (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0],  # the GPU the run uses
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
        except OSError:
            return
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip().isdigit():
                self.samples.append((time.monotonic(), int(line)))

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait()

    def idle_share(self, start: float, end: float) -> float | None:
        xs = [u for t, u in self.samples if start <= t <= end]
        return sum(u == 0 for u in xs) / len(xs) if xs else None


class HostSampler:
    """Every 100 ms: how busy the CPUs were since the last look (/proc/stat) and whether a process holds
    a GPU lease (/proc/locks, so the look takes no lock and never delays a waiter). Tells a run bound by
    its builders (CPUs busy, lease often free) from one bound by the device lease (held nearly always)."""

    PERIOD_S = 0.1

    def __init__(self, lease_dir: Path) -> None:
        self.lease_dir = lease_dir
        self.samples: list[tuple[float, float, bool]] = []  # (time, CPU busy share, lease held)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _cpu_times() -> tuple[int, int] | None:
        try:
            fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields), idle

    def _held(self) -> bool:
        from kbench.sandbox.lease import locker

        return any(locker(lock) is not None for lock in self.lease_dir.glob("*.lock"))

    def _run(self) -> None:
        last = self._cpu_times()
        while not self._stop.wait(self.PERIOD_S):
            now = self._cpu_times()
            busy = 0.0
            if now is not None and last is not None and now[0] > last[0]:
                busy = 1.0 - (now[1] - last[1]) / (now[0] - last[0])
            last = now
            self.samples.append((time.monotonic(), round(busy, 3), self._held()))

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join()

    def shares(self, start: float, end: float) -> dict[str, float | None]:
        xs = [(b, h) for t, b, h in self.samples if start <= t <= end]
        if not xs:
            return {"cpu_busy": None, "lease_held": None}
        return {
            "cpu_busy": round(statistics.fmean(b for b, _ in xs), 3),
            "lease_held": round(sum(h for _, h in xs) / len(xs), 3),
        }


class Log:
    """Every build and verdict as one JSON line the moment it is known: a run cut short (an outer timeout)
    still leaves its rows."""

    def __init__(self, path: Path) -> None:
        self.fh = path.open("a")
        self.lock = threading.Lock()

    def write(self, row: dict[str, Any]) -> None:
        with self.lock:
            self.fh.write(json.dumps(row, default=str) + "\n")
            self.fh.flush()


def run_kbench(
    jobs: list[Job],
    cfg: RunConfig,
    deadline: float,
    sampler: GpuSampler,
    log: Log,
    label: str,
    host: HostSampler | None = None,
    prefetch: bool = True,
) -> dict[str, Any]:
    builds: dict[int, dict[str, Any]] = {}
    verdicts: list[dict[str, Any]] = []
    t0 = time.monotonic()
    first_verdict = [0.0]
    stages, jobs = closed_batch(cfg, jobs)  # each job's tag: an Order whose ref is its number

    def build(job: Job) -> BuildResult | None:
        if time.monotonic() > deadline:
            return BuildResult(ok=False, backend=cfg.backend, log="skipped: --max-seconds reached")
        s = time.monotonic()
        b = stages.build(job)
        if b is not None:
            builds[int(job.tag.ref)] = {
                "seconds": round(b.seconds, 2),
                "wall": round(time.monotonic() - s, 2),
                "recipe": b.recipe,
                "ok": b.ok,
                "done_at": round(time.monotonic() - t0, 1),
            }
            log.write({"kind": "build", "pass": label, "tag": int(job.tag.ref)} | builds[int(job.tag.ref)])
        return b

    def evaluate(job: Job, device: str, built: BuildResult | None) -> Verdict | None:  # type: ignore[return]
        if built is not None and built.log.startswith("skipped") or time.monotonic() > deadline:
            return None  # past the cap: no new evaluation starts; report what finished
        return stages.evaluate(job, device, built)

    prefetched: list[dict[str, Any]] = []

    def ahead(job: Job, device: str) -> None:  # a lane's reference run for a job still building
        if time.monotonic() > deadline:
            return
        s = time.monotonic()
        phases = stages.prefetch(job, device)
        if not phases:
            return  # nothing ran: prefetched already on this device, declined, or the pool had it
        row = {"tag": int(job.tag.ref), "problem": job.problem.key, "seconds": round(time.monotonic() - s, 2)}
        row["phases"] = phases  # the run's (its verdict shows the reference shared)
        prefetched.append(row | {"done_at": round(time.monotonic() - t0, 1)})
        log.write({"kind": "prefetch", "pass": label} | prefetched[-1])

    def on_result(job: Job, v: Verdict | None) -> None:
        if v is None:
            return
        now = time.monotonic() - t0
        first_verdict[0] = first_verdict[0] or now
        verdicts.append(
            {
                "tag": int(job.tag.ref),
                "problem": job.problem.key,
                "origin": job.candidate.origin,
                "status": v.status.value,
                "rule": v.rule,
                "message": v.message[:300],
                "phases": dict(v.phases),
                "seconds": round(v.seconds, 2),
                "done_at": round(now, 1),
                "time_ms": v.timing.median_ms if v.timing else None,
                "timed_ms": (v.timing.n * v.timing.mean_ms) if v.timing else None,
                "speedup_eager": v.speedup("eager"),
                "timing_stops": timing_stops(v),
            }
        )
        log.write({"kind": "verdict", "pass": label} | verdicts[-1])

    ex = LocalExecutor(device=cfg.device, builders=cfg.builders, slots=cfg.gpu_slots)
    ex.run(jobs, build, evaluate, on_result, ahead if prefetch else None)  # type: ignore[arg-type]
    wall = time.monotonic() - t0
    built = max((b["done_at"] for b in builds.values()), default=0.0)
    out = {
        "wall_s": round(wall, 1),
        "builds": builds,
        "verdicts": verdicts,
        "first_verdict_s": first_verdict[0],
        "gpu_idle_share": sampler.idle_share(t0 + first_verdict[0], t0 + wall),
        "all_built_s": built,
        "prefetched": prefetched,
    }
    if host is not None:
        # while builds ran, and from the last build on (when only the GPU lanes are left)
        out["while_building"] = host.shares(t0, t0 + built)
        out["after_builds"] = host.shares(t0 + built, t0 + wall)
    return out


def timing_stops(v: Verdict) -> dict[str, str]:
    """Why each timing loop of the verdict stopped (referee/timing.py: `done`, `budget`, `flagged`), the
    candidate's and each baseline's that it ran or shared."""
    timed = ([("candidate", v.timing)] if v.timing else []) + list(v.baselines)
    return {name: stats.loop.stop if stats.loop and stats.loop.stop else "?" for name, stats in timed}


def stop_counts(verdicts: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """{timed callable: {why its loop stopped: verdicts}}: a loop that ran to its budget spent it on the lease."""
    out: dict[str, dict[str, int]] = {}
    for v in verdicts:
        for name, why in (v.get("timing_stops") or {}).items():
            out.setdefault(name, {}).setdefault(why, 0)
            out[name][why] += 1
    return {name: dict(sorted(counts.items())) for name, counts in sorted(out.items())}


def standard_builds(jobs: list[Job], cfg: RunConfig) -> list[dict[str, Any]]:
    """Build each job's candidate as plain load_inline would (no fast recipe, no PCH), all at once."""
    folder = tempfile.mkdtemp(prefix="kbench-plain-")
    plain = cfg.model_copy(
        update={"fast_builds": False, "precompiled_headers": "off", "cache_dir": Path(folder)}
    )

    def one(job: Job) -> dict[str, Any]:
        b = prebuild(job.candidate, plain, cfg.device)
        return {"problem": job.problem.key, "seconds": round(b.seconds, 1), "ok": b.ok, "recipe": b.recipe}

    try:
        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            return list(pool.map(one, jobs))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def phase_values(verdicts: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Each phase's seconds in the verdicts that had it (workers' phases, then the host's after each)."""
    values: dict[str, list[float]] = {}
    for v in verdicts:
        for k, x in v["phases"].items():
            values.setdefault(k, []).append(x)
    return values


def phase_sums(verdicts: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds per phase over the verdicts, with the count of verdicts that had it: where a lane's time
    went."""
    return {f"{k} (n={len(x)})": round(sum(x), 1) for k, x in sorted(phase_values(verdicts).items())}


def summarize(
    res: dict[str, Any], warm: dict[str, Any] | None, plain: list[dict[str, Any]], n_jobs: int
) -> dict[str, Any]:
    vs, bs = res["verdicts"], list(res["builds"].values())
    cold = [b["seconds"] for b in bs if b["recipe"] != "cache"]
    by_recipe: dict[str, list[float]] = {}
    for b in bs:
        by_recipe.setdefault(b["recipe"] or "?", []).append(b["seconds"])
    out: dict[str, Any] = {
        "candidates": n_jobs,
        "verdicts": len(vs),
        "problems": len({v["problem"] for v in vs}),  # distinct problems among the verdicts
        "wall_s": res["wall_s"],
        "seconds_per_verdict": round(res["wall_s"] / len(vs), 2) if vs else None,
        "verdicts_per_min": round(60 * len(vs) / res["wall_s"], 1) if vs else None,
        "statuses": {s: sum(v["status"] == s for v in vs) for s in sorted({v["status"] for v in vs})},
        "cold_build_s": {
            "median": round(statistics.median(cold), 1),
            "p90": round(_pct(cold, 0.9), 1),
            "max": round(max(cold), 1),
        }
        if cold
        else None,
        "build_s_by_recipe": {
            k: {"n": len(x), "median": round(statistics.median(x), 1)} for k, x in by_recipe.items()
        },
        "first_verdict_s": res["first_verdict_s"],
        "gpu_idle_share": res["gpu_idle_share"],
        "all_built_s": res.get("all_built_s"),
        "references_prefetched": len(res.get("prefetched", [])),
        # where the prefetched reference runs' seconds went (their verdicts show them shared)
        "prefetch_phase_seconds": phase_sums(res.get("prefetched", [])),
        "while_building": res.get("while_building"),
        "after_builds": res.get("after_builds"),
        "phase_seconds": phase_sums(vs),
        "timing_stops": stop_counts(vs),
    }
    if warm and warm["verdicts"]:
        wv = warm["verdicts"]
        per = warm["wall_s"] / len(wv)
        timed = statistics.fmean((v["timed_ms"] or 0) / 1000 for v in wv)
        hits = [b["seconds"] for b in warm["builds"].values()]
        out["warm"] = {
            "verdicts": len(wv),
            "wall_s": warm["wall_s"],
            "seconds_per_verdict": round(per, 2),
            "timed_loop_s": round(timed, 2),
            "overhead_per_verdict_s": round(per - timed, 2),
            "cache_hit_build_s": round(statistics.median(hits), 2) if hits else None,
            "phase_seconds": phase_sums(wv),
        }
    if plain:
        xs = [p["seconds"] for p in plain if p["ok"]]
        out["standard_build_s"] = (
            {"n": len(xs), "median": round(statistics.median(xs), 1), "min": min(xs), "max": max(xs)}
            if xs
            else None
        )
    return out


def markdown(env: dict[str, Any], s: dict[str, Any], args: argparse.Namespace) -> str:
    date = dt.date.today().isoformat()
    lines = [
        "# Evaluation throughput: distinct level-2 CUDA candidates, cold caches",
        "",
        f"{env.get('gpu')} x{env.get('gpu_count', 1)}, {usable_cpus()} of {env.get('cpu_count')} CPUs ({env.get('cpu')}), "
        f"torch {env.get('torch')}, triton {env.get('triton')}, nvcc {env.get('nvcc')}, Python {env.get('python')}, {date}.",
        f"Command: `python benchmarks/throughput.py --variants {args.variants}"
        + (f" --solutions {args.solutions}" if args.solutions else "")
        + (f" --limit {args.limit}" if args.limit else "")
        + f" --builders {args.builders} --slots {args.slots} --max-seconds {args.max_seconds:g}{' --no-prefetch' if args.no_prefetch else ''}`",
        "",
        "| measure | value |",
        "| --- | --- |",
    ]
    for k, v in s.items():
        lines.append(f"| {k} | {json.dumps(v) if isinstance(v, dict) else v} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--variants", type=int, default=3)
    ap.add_argument("--solutions", type=int, default=0, help="the first N shipped solutions (0: all)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many candidates (0: all)")
    ap.add_argument("--builders", type=int, default=0, help="0: the local executor's default")
    ap.add_argument("--slots", type=int, default=3)
    ap.add_argument("--warm", type=int, default=24, help="candidates in the warm pass (0: none)")
    ap.add_argument("--warm-seconds", type=float, default=90.0, help="cap of the warm pass")
    ap.add_argument("--standard-sample", type=int, default=0)
    ap.add_argument("--standard-only", action="store_true", help="only the plain builds of --standard-sample")
    ap.add_argument("--cache-dir", type=Path, default=None, help="default: a fresh (cold) folder")
    ap.add_argument("--max-seconds", type=float, default=330.0)
    ap.add_argument("--device", default="cuda", help="cpu: a dry run with the cpp solutions, small preset")
    ap.add_argument(
        "--no-prefetch", action="store_true", help="GPU lanes never run a reference while its job builds"
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = environment()
    gpu = args.device != "cpu"
    jobs = batch(args.variants, args.limit, "cuda" if gpu else "cpp", args.solutions)
    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="kbench-throughput-"))
    try:
        run(args, env, jobs, cache, gpu)
    finally:
        # a fresh cold folder holds every problem's reference outputs at full size (tens of GB over the
        # batch): a second run on the same machine would otherwise find the disk full
        if args.cache_dir is None:
            shutil.rmtree(cache, ignore_errors=True)


def run(args: argparse.Namespace, env: dict[str, Any], jobs: list[Job], cache: Path, gpu: bool) -> None:
    cfg = RunConfig(
        backend="cuda" if gpu else "cpp",
        device=args.device,
        preset="full" if gpu else "small",
        baselines=["eager"],
        cache_dir=cache,
        builders=args.builders,
        gpu_slots=args.slots,
    )
    plain = standard_builds(jobs[: args.standard_sample], cfg) if args.standard_sample else []
    if args.standard_only:
        (args.out / "plain_builds.json").write_text(json.dumps({"env": env, "standard": plain}, indent=1))
        print(json.dumps(plain, indent=1))
        return
    sampler = GpuSampler()
    sampler.start()
    from kbench.sandbox.lease import lease_dir

    host = HostSampler(cfg.lease_dir or lease_dir())
    host.start()
    log = Log(args.out / "throughput.jsonl")
    deadline = time.monotonic() + args.max_seconds
    res = run_kbench(jobs, cfg, deadline, sampler, log, "cold", host, not args.no_prefetch)
    write(args, env, summarize(res, None, plain, len(jobs)), res, None, plain)  # kept if the warm pass is cut
    warm = None
    if args.warm:
        warm = run_kbench(jobs[: args.warm], cfg, time.monotonic() + args.warm_seconds, sampler, log, "warm")
    sampler.stop()
    host.stop()
    summary = summarize(res, warm, plain, len(jobs))
    write(args, env, summary, res, warm, plain)
    print(json.dumps(summary, indent=1))


def write(
    args: argparse.Namespace,
    env: dict[str, Any],
    summary: dict[str, Any],
    res: dict[str, Any],
    warm: dict[str, Any] | None,
    plain: list[dict[str, Any]],
) -> None:
    (args.out / "throughput.json").write_text(
        json.dumps(
            {"env": env, "summary": summary, "cold": res, "warm": warm, "standard": plain},
            indent=1,
            default=str,
        )
    )
    (args.out / "throughput.md").write_text(markdown(env, summary, args))


if __name__ == "__main__":
    main()
