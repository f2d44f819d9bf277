"""The anti-cheat fixtures on a GPU, plus every shipped solution as an honest control (false positives).

    python benchmarks/selftest_gpu.py --out OUT [--solutions cuda,triton] [--max-seconds 300]

The fixtures are judged exactly as `kbench selftest --device cuda` judges them (kbench.selftest.runner's
`Judges`: one `kbench.api.Evaluator` per fixture config), all submitted at once: CUDA fixtures are built
by CPU builders in parallel first, and evaluations overlap their process start on the GPU lease. The
prompts' worked examples and, with --solutions, every shipped CUDA and Triton level-2 solution go to one
more Evaluator (baseline eager, full preset; benchmarks/engine.py) and must get `ok` with no
warning-free rule firing. Jobs whose evaluation has not started at --max-seconds are cancelled.
Writes OUT/selftest_gpu.jsonl (one row per verdict, as it arrives) and OUT/selftest_gpu.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from engine import shared, verdicts

from kbench.api import Submission
from kbench.config import RunConfig
from kbench.hardware import environment
from kbench.problems.sources import load_source, make_problem
from kbench.prompts.builder import EXAMPLES
from kbench.selftest.runner import Fixture, Judges, caught_as_expected, discover
from kbench.selftest.runner import submission as fixture_submission
from kbench.solutions import shipped_candidate as reference_candidate
from kbench.types import Verdict

KINDS = ("fixture", "example", "solution")


@dataclass(frozen=True)
class Item:
    """One verdict asked for. `label`: its row's name (a fixture's id, an example's backend/stem, a
    solution's file name); a fixture's header rides along (its expectation, its Judges config)."""

    kind: str  # fixture | example | solution
    label: str
    submission: Submission
    fixture: Fixture | None = None

    @property
    def name(self) -> str:
        """The job's name for --skip-passed and --rerun: a solution's with its backend (one file name per
        problem in every backend)."""
        return f"{self.submission.backend}/{self.label}" if self.kind == "solution" else self.label


def jobs(solution_backends: list[str], fixtures: bool = True) -> list[Item]:
    out = []
    for f in discover(backends=["cuda", "triton"], gpu=True) if fixtures else ():
        submission = fixture_submission(f)  # as `Judges.judge` submits it
        out.append(Item("fixture", f.id, submission, f))
    for i, (stem, _) in enumerate(EXAMPLES):  # the prompts' worked examples are honest controls too
        ref = (resources.files("kbench.prompts") / "examples" / "reference" / f"{stem}.py").read_text()
        problem = make_problem("examples", 0, i + 1, stem, ref, None)
        for backend in ("cuda", "triton"):
            text = (resources.files("kbench.prompts") / "examples" / backend / f"{stem}.py").read_text()
            out.append(Item("example", f"{backend}/{stem}", Submission(problem, text, backend)))
    for backend in solution_backends:
        for p in load_source("kbench"):
            c = reference_candidate(p, backend) if p.level == 2 else None
            if c is not None:
                out.append(Item("solution", Path(c.origin).name, Submission(p, c.source, backend)))
    return out


def _row_name(row: dict[str, Any]) -> str | None:
    """A row's job name; None for a solution row of the earliest format, which named no backend."""
    if "kind" not in row:  # the first format: one fixture per row, under "fixture"
        return str(row["fixture"])
    if row["kind"] == "solution":
        return f"{row['backend']}/{row['name']}" if "backend" in row else None
    return str(row["name"])


def _todo(args: argparse.Namespace) -> list[Item]:
    todo = jobs([b for b in args.solutions.split(",") if b], fixtures=not args.controls_only)
    if not args.skip_passed:
        return todo
    rows_before = [
        json.loads(line) for f in args.skip_passed for line in f.read_text().splitlines() if line.strip()
    ]
    again = [part for part in args.rerun.split(",") if part]
    passed = {n for n in (_row_name(r) for r in rows_before if r["passed"]) if n is not None}
    passed = {n for n in passed if not any(part in n for part in again)}
    todo = [j for j in todo if j.name not in passed or (args.fixtures_again and j.kind != "solution")]
    # the jobs named by --rerun first, then the controls still missing, then the rest
    todo.sort(key=lambda j: (not any(part in j.name for part in again), j.kind != "solution"))
    return todo


def _alone(v: Verdict) -> dict[str, Any]:
    """Time per call in batches and a call alone, the candidate's and its eager baseline's: the two numbers
    the batch-together rule sets against each other (evaluate/judge.py)."""
    eager = dict(v.baselines).get("eager") if v.baselines else None
    return {
        f"{who}_{what}": value
        for who, t in (("candidate", v.timing), ("eager", eager))
        for what, value in (
            ("ms", t.median_ms if t is not None else None),
            ("alone_ms", t.loop.single_call_ms if t is not None and t.loop is not None else None),
        )
    }


def _row(item: Item, v: Verdict) -> dict[str, Any]:
    if item.fixture is not None:
        expected, passed = item.fixture.expected, caught_as_expected(item.fixture, v)
    else:
        expected, passed = "ok", v.ok and not v.rule
    return {
        "kind": item.kind,
        "name": item.label,
        "expected": expected,
        "got": f"{v.status.value} {v.rule}".strip(),
        "device": v.device,
        "backend": item.submission.backend,
        "passed": passed,
        "seconds": round(v.seconds, 1),
        "warnings": list(v.warnings),
        "speedup_eager": v.speedup("eager"),
        **_alone(v),
        "message": v.message[:300],
        "phases": dict(v.phases),
    }


def judge(todo: list[Item], base: RunConfig, max_seconds: float, log: Any) -> list[dict[str, Any]]:
    """Every item submitted at once, each row logged and printed as its verdict comes."""
    controls_cfg = base.model_copy(update={"device": "cuda", "preset": "full", "baselines": ["eager"]})
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + max_seconds
    with Judges(gpu=True, base=base) as judges, shared(controls_cfg) as controls:
        tickets = [
            (judges.evaluator(j.fixture) if j.fixture else controls).submit(j.submission) for j in todo
        ]
        for i, v in verdicts(tickets, deadline, [f"{j.kind} {j.label}" for j in todo]):
            item = todo[i]
            row = _row(item, v)
            rows.append(row)
            log.write(json.dumps(row) + "\n")
            log.flush()
            print(
                ("pass " if row["passed"] else "FAIL ") + f"{item.kind} {row['name']}: expected "
                f"{row['expected']}, got {row['got']} ({v.seconds:.0f} s)",
                flush=True,
            )
    return rows


def markdown(rows: list[dict[str, Any]], todo: int, wall: float, solutions: str) -> list[str]:
    env = environment()
    lines = [
        "# GPU selftest: anti-cheat fixtures and shipped solutions",
        "",
        f"{env.get('gpu')}, torch {env.get('torch')}, triton {env.get('triton')}, nvcc {env.get('nvcc')}, "
        f"Python {env.get('python')}, {dt.date.today().isoformat()}. Wall time {wall:.0f} s for {len(rows)} of "
        f"{todo} verdicts (`python benchmarks/selftest_gpu.py{' --solutions ' + solutions if solutions else ''}`).",
        "",
    ]
    for kind in KINDS:
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
    return lines


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
    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="kbench-selftest-"))
    base = RunConfig(cache_dir=cache, gpu_slots=args.slots)
    todo = _todo(args)
    t0 = time.monotonic()
    with (args.out / "selftest_gpu.jsonl").open("w") as log:
        rows = judge(todo, base, args.max_seconds, log)
    wall = time.monotonic() - t0
    lines = markdown(rows, len(todo), wall, args.solutions)
    (args.out / "selftest_gpu.md").write_text("\n".join(lines))
    print("\n".join(lines[:4]))


if __name__ == "__main__":
    main()
