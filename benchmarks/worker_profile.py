"""Where a warm candidate worker's seconds go: its phases, and a profile of the Python calls inside them.

    python benchmarks/worker_profile.py --out OUT [--problems 2/1,2/23] [--backend triton] [--device cuda]

For each problem its shipped solution runs through the candidate worker's job (`CandidateJob.run`, the
code a sandboxed worker runs, here in this process with no sandbox around it) twice: the first run builds
and warms every cache (a warm verdict's candidate finds them warm), the second runs under cProfile. A
warm verdict's `cand:correctness` and `cand:timing` are these phases; what the profile adds is which
calls inside them cost the time (output files and their digests, fingerprints, the timing loop's own
overhead). `--profile first` profiles the first run instead: run once to warm the disk caches (Triton's,
the builds'), then again in a new process, and the profile shows a fresh worker's first-call costs (CUDA
context, kernel loading) that a cold verdict pays. Writes OUT/worker_profile.md (phases, then the top calls by own and by cumulative time) and
OUT/worker_profile.json.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import re
import tempfile
import time
from pathlib import Path
from typing import Any


def profile_problem(problem: str, args: argparse.Namespace, cache: Path) -> dict[str, Any]:
    from kbench.backends import get_backend
    from kbench.config import resolve
    from kbench.evaluate.plan import SAMPLE_COUNT, job_spec, make_plan
    from kbench.problems import get_problem
    from kbench.sandbox import lease
    from kbench.solutions import shipped_candidate
    from kbench.worker.candidate import CandidateJob

    prob = get_problem(problem)
    cand = shipped_candidate(prob, args.backend)
    if cand is None:
        raise SystemExit(f"no shipped {args.backend} solution for {problem}")
    flags = {"backend": args.backend, "preset": args.preset, "device": args.device, "cache_dir": cache}
    cfg = resolve(flags=flags)
    plan = make_plan(cfg, args.device)
    runs: list[dict[str, Any]] = []
    text = ""
    for attempt in range(2):
        jobdir = Path(tempfile.mkdtemp(prefix="kbench-profile-"))
        path = jobdir / "candidate.py"
        path.write_text(cand.source)
        spec = job_spec(
            prob,
            cfg,
            plan,
            role="candidate",
            backend=args.backend,
            candidate_file=str(path),
            kernel_names=list(get_backend(args.backend).kernel_names(cand.source)),
            seeds=plan.fixed + plan.secret,
            timing_seeds=plan.timing,
            sample_count=SAMPLE_COUNT,
            sample_whole_bytes=cfg.sample_whole_mib << 20,
            measure=True,
        )
        lease.required = lambda role, device: False  # one process runs both jobs: no lease between them
        t0 = time.perf_counter()
        job = CandidateJob(spec, jobdir)
        setup = time.perf_counter() - t0
        prof = cProfile.Profile() if attempt == (args.profile == "second") else None
        if prof is not None:
            prof.enable()
        result = job.run()
        if prof is not None:
            prof.disable()
        wall = time.perf_counter() - t0
        runs.append(
            {
                "status": result.status.value,
                "message": result.message[:300],
                "wall_s": round(wall, 3),
                "phases": {"setup": round(setup, 3), **result.phases},
                "timing_n": result.timing.n if result.timing else 0,
                "timing_extra": dict(result.timing.extra) if result.timing else {},
                "profiled": prof is not None,
            }
        )
        if prof is not None:
            for key in ("tottime", "cumulative"):
                buf = io.StringIO()
                pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(args.top)
                text += f"\n#### {problem}: top {args.top} by {key}\n\n```\n{_trim(buf.getvalue())}\n```\n"
    return {"problem": problem, "runs": runs, "profile": text}


def _trim(stats: str) -> str:
    """pstats' table without its header lines, paths shortened to the package's."""
    lines = [line for line in stats.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return "\n".join(_short(line) for line in lines[start:])


def _short(line: str) -> str:
    """A profile line without machine paths: packages from their own folder, the candidate as <job>."""
    line = re.sub(r"\S*/kbench-profile-[^/\s]+/", "<job>/", line)
    return re.sub(r"/\S*/(site-packages|src|python3\.\d+)/", "", line)


def report(rows: list[dict[str, Any]]) -> str:
    from kbench.hardware import environment

    env = environment()
    out = [
        "# worker profile",
        "",
        f"{env.get('gpu', 'no GPU')}, torch {env.get('torch')}, kbench {env.get('kbench')}",
        "",
        "| problem | run | status | wall s | timed calls | phases (s) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        for i, run in enumerate(row["runs"]):
            phases = ", ".join(f"{k} {v}" for k, v in run["phases"].items())
            label = ("first" if i == 0 else "second") + (" (profiled)" if run["profiled"] else "")
            out.append(
                f"| {row['problem']} | {label} | {run['status']} | {run['wall_s']} | {run['timing_n']} | {phases} |"
            )
    for row in rows:
        out.append(row["profile"])
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--problems", default="2/1,2/23")
    ap.add_argument("--backend", default="triton")
    ap.add_argument("--preset", default="full")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--profile", choices=("first", "second"), default="second",
                    help="which run to profile: the first (a fresh process's first-call costs) or the second")  # fmt: skip
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kbench-profile-cache-") as cache:
        for problem in args.problems.split(","):
            rows.append(profile_problem(problem, args, Path(cache)))
            (args.out / "worker_profile.json").write_text(json.dumps(rows, indent=1))
            (args.out / "worker_profile.md").write_text(report(rows))
    print(report(rows))


if __name__ == "__main__":
    main()
