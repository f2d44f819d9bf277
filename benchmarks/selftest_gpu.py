"""The anti-cheat fixtures on a GPU, plus every shipped solution as an honest control (false positives).

    python benchmarks/selftest_gpu.py --out OUT [--solutions cuda,triton] [--max-seconds 300]

Same fixtures, configs and judging as `kbench selftest --gpu` (kbench.selftest), but run through the local
executor: CUDA fixtures are built by CPU builders in parallel first, and evaluations overlap their
process start on the GPU lease. With --solutions, every shipped CUDA and Triton level-2 solution is
evaluated too (baseline eager, full preset) and must get `ok` with no warning-free rule firing.
Writes OUT/selftest_gpu.jsonl (one row per verdict, as it arrives) and OUT/selftest_gpu.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

from kbench.config import RunConfig
from kbench.evaluate.flow import evaluate
from kbench.evaluate.prebuild import prebuild
from kbench.evaluate.reference_pool import ReferencePool
from kbench.executors import Job
from kbench.executors.local import LocalExecutor
from kbench.hardware import environment
from kbench.problems.sources import load_source, make_problem
from kbench.prompts.builder import EXAMPLES
from kbench.selftest.runner import caught_as_expected, discover, fixture_config, fixture_problem
from kbench.solutions import shipped_candidate as reference_candidate
from kbench.types import BuildResult, Candidate, Verdict


def jobs(solution_backends: list[str], base: RunConfig, fixtures: bool = True) -> list[Job]:
    out = []
    for f in discover(backends=["cuda", "triton"], gpu=True) if fixtures else ():
        problem = fixture_problem(f)
        cand = Candidate(problem.key, f.backend, f.path.read_text(), origin=str(f.path))
        out.append(Job(problem, cand, tag=("fixture", f, fixture_config(f, True, base))))
    for i, (stem, _) in enumerate(EXAMPLES):  # the prompts' worked examples are honest controls too
        ref = (resources.files("kbench.prompts") / "examples" / "reference" / f"{stem}.py").read_text()
        problem = make_problem("examples", 0, i + 1, stem, ref, None)
        for backend in ("cuda", "triton"):
            text = (resources.files("kbench.prompts") / "examples" / backend / f"{stem}.py").read_text()
            cfg = base.model_copy(
                update={"backend": backend, "device": "cuda", "preset": "full", "baselines": ["eager"]}
            )
            out.append(
                Job(
                    problem,
                    Candidate(problem.key, backend, text, origin=f"example/{backend}/{stem}"),
                    tag=("example", f"{backend}/{stem}", cfg),
                )
            )
    if solution_backends:
        for backend in solution_backends:
            for p in load_source("kbench"):
                c = reference_candidate(p, backend) if p.level == 2 else None
                if c is not None:
                    cfg = base.model_copy(
                        update={
                            "backend": backend,
                            "device": "cuda",
                            "preset": "full",
                            "baselines": ["eager"],
                        }
                    )
                    out.append(Job(p, c, tag=("solution", c.origin, cfg)))
    return out


def _name(job: Job) -> str:
    kind, what, _ = job.tag
    if kind == "solution":  # one file name per problem in every backend
        return f"{job.candidate.backend}/{Path(what).name}"
    return str(what.id if kind == "fixture" else what)


def _row_name(row: dict[str, Any]) -> str | None:
    """A row's job name; None for a solution row of the earliest format, which named no backend."""
    if "kind" not in row:  # the first format: one fixture per row, under "fixture"
        return str(row["fixture"])
    if row["kind"] == "solution":
        return f"{row['backend']}/{row['name']}" if "backend" in row else None
    return str(row["name"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--solutions", default="", help="backends whose shipped solutions to add: cuda,triton")
    ap.add_argument("--cache-dir", type=Path, default=None)
    ap.add_argument("--slots", type=int, default=3)
    ap.add_argument(
        "--skip-passed",
        type=Path,
        nargs="*",
        default=[],
        help="selftest_gpu.jsonl files: skip what passed in any of them",
    )
    ap.add_argument(
        "--rerun",
        default="",
        help="comma-separated name parts: matching jobs run first, even if --skip-passed lists them (e.g. after a change)",
    )
    ap.add_argument(
        "--fixtures-again", action="store_true", help="fixtures and prompt examples run even if passed before"
    )
    ap.add_argument(
        "--controls-only",
        action="store_true",
        help="no anti-cheat fixtures: the prompt examples and the solutions (in --solutions' backend order)",
    )
    ap.add_argument("--max-seconds", type=float, default=300.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    base = RunConfig(cache_dir=args.cache_dir or Path(tempfile.mkdtemp(prefix="kbench-selftest-")))
    todo = jobs([b for b in args.solutions.split(",") if b], base, fixtures=not args.controls_only)
    if args.skip_passed:
        rows_before = [
            json.loads(line) for f in args.skip_passed for line in f.read_text().splitlines() if line.strip()
        ]
        again = [part for part in args.rerun.split(",") if part]
        passed = {n for n in (_row_name(r) for r in rows_before if r["passed"]) if n is not None}
        passed = {n for n in passed if not any(part in n for part in again)}
        todo = [j for j in todo if _name(j) not in passed or (args.fixtures_again and j.tag[0] != "solution")]
        # the jobs named by --rerun first, then the controls still missing, then the rest
        todo.sort(key=lambda j: (not any(part in _name(j) for part in again), j.tag[0] != "solution"))
    deadline = time.monotonic() + args.max_seconds
    pool = ReferencePool()  # one reference run per problem (and per fixture config), as `kbench run` does
    rows: list[dict[str, Any]] = []
    log = (args.out / "selftest_gpu.jsonl").open("w")

    def build(job: Job) -> BuildResult | None:
        if time.monotonic() > deadline:  # its evaluation will not run: no builder's time for it
            return None
        kind, _, cfg = job.tag
        return prebuild(job.candidate, cfg, "cuda", batch=len(todo))

    def run(job: Job, device: str, built: BuildResult | None) -> Verdict | None:
        if time.monotonic() > deadline:
            return None
        _, _, cfg = job.tag
        return evaluate(
            job.problem, job.candidate, cfg.model_copy(update={"device": device}), references=pool
        )

    def on_result(job: Job, v: Verdict | None) -> None:
        kind, what, _ = job.tag
        if v is None:
            return
        if kind == "fixture":
            name, expected, passed = what.id, what.expected, caught_as_expected(what, v)
        else:
            name, expected = (Path(what).name if kind == "solution" else what), "ok"
            passed = v.ok and not v.rule
        row = {
            "kind": kind,
            "name": name,
            "expected": expected,
            "got": f"{v.status.value} {v.rule}".strip(),
            "device": v.device,
            "backend": job.candidate.backend,
            "passed": passed,
            "seconds": round(v.seconds, 1),
            "warnings": list(v.warnings),
            "speedup_eager": v.speedup("eager"),
            "message": v.message[:300],
            "phases": dict(v.phases),
        }
        rows.append(row)
        log.write(json.dumps(row) + "\n")
        log.flush()
        print(
            ("pass " if passed else "FAIL ") + f"{kind} {name}: expected {expected}, got {row['got']} "
            f"({v.seconds:.0f} s)",
            flush=True,
        )

    t0 = time.monotonic()
    LocalExecutor(device="cuda", slots=args.slots).run(
        todo,
        build,
        run,
        on_result,  # type: ignore[arg-type]
    )
    wall = time.monotonic() - t0
    env = environment()
    lines = [
        "# GPU selftest: anti-cheat fixtures and shipped solutions",
        "",
        f"{env.get('gpu')}, torch {env.get('torch')}, triton {env.get('triton')}, nvcc {env.get('nvcc')}, "
        f"Python {env.get('python')}, {dt.date.today().isoformat()}. Wall time {wall:.0f} s for {len(rows)} of "
        f"{len(todo)} verdicts (`python benchmarks/selftest_gpu.py{' --solutions ' + args.solutions if args.solutions else ''}`).",
        "",
    ]
    for kind in ("fixture", "example", "solution"):
        mine = [r for r in rows if r["kind"] == kind]
        if mine:
            lines += [
                f"{kind}s: {sum(r['passed'] for r in mine)}/{len(mine)} got their expected verdict",
                "",
                "| name | expected | got | pass | s |",
                "|---|---|---|---|---|",
            ]
            lines += [
                f"| {r['name']} | {r['expected']} | {r['got']} | {'yes' if r['passed'] else '**NO**'} | "
                f"{r['seconds']} |"
                for r in sorted(mine, key=lambda r: r["name"])
            ]
            lines.append("")
    (args.out / "selftest_gpu.md").write_text("\n".join(lines))
    print("\n".join(lines[:4]))


if __name__ == "__main__":
    main()
