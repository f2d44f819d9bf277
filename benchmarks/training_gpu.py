"""The training level's shipped solutions under the evaluator, by pass: forward, backward and the step.

    python benchmarks/training_gpu.py --out OUT [--backends triton,cuda] [--max-seconds 480]

Every shipped level-5 solution of the backends asked for, and the prompts' forward-and-backward example,
judged as any candidate is (submitted together to one `kbench.api.Evaluator`, benchmarks/engine.py:
built ahead on CPU builders, evaluated on `--slots` lanes per GPU sharing each problem's reference run;
sandboxed, the step's outputs and every gradient compared on fixed and secret seeds, the timed calls
checked, the backward ablation), at the `full` preset against eager and torch.compile (its backward
compiled too).
Writes OUT/training.jsonl (a row per verdict, as it arrives) and OUT/training.md: status, the step's time,
each pass's speedup over eager and torch.compile, the fraction of the step's speed of light, and geometric
means over the ok verdicts. Jobs whose evaluation has not started at --max-seconds are cancelled and the
table says how many. `--device cpu --backends cpp --preset small` runs the same pipeline on a CPU.
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

from engine import shared, verdicts

from kbench import metrics as m
from kbench.api import Submission
from kbench.config import RunConfig
from kbench.hardware import environment
from kbench.problems.sources import load_source, make_problem
from kbench.prompts.builder import TRAINING_EXAMPLES
from kbench.report.passes import PASSES, pass_geomeans
from kbench.solutions import shipped_candidate
from kbench.types import Verdict

MODES = ("eager", "compile")


def jobs(backends: list[str]) -> list[tuple[str, Submission]]:
    """Each candidate's name in the table and its submission, the prompts' example first."""
    out = []
    for stem, _ in TRAINING_EXAMPLES:  # the prompts' worked example, an honest control too
        ref = (resources.files("kbench.prompts") / "examples" / "reference" / f"{stem}.py").read_text()
        problem = make_problem("examples", 5, 1, stem, ref, None)
        for backend in backends:
            path = resources.files("kbench.prompts") / "examples" / backend / f"{stem}.py"
            if path.is_file():
                out.append((f"example/{backend}/{stem}", Submission(problem, path.read_text(), backend)))
    for p in load_source("kbench"):
        if p.level != 5:
            continue
        for backend in backends:
            c = shipped_candidate(p, backend)
            if c is not None:
                out.append((f"{backend}/{p.number}_{p.name}", Submission(p, c.source, backend)))
    return out


def row_of(name: str, v: Verdict) -> dict[str, Any]:
    step = v.pass_ms("candidate", "step")
    return {
        "name": name,
        "problem": v.problem_key,
        "backend": v.backend,
        "status": f"{v.status.value} {v.rule}".strip(),
        "message": v.message[:300],
        "step_ms": step,
        "passes": {p: {mode: v.pass_speedup(p, mode) for mode in MODES} for p in PASSES},
        "pass_ms": {p: v.pass_ms("candidate", p) for p in PASSES},
        "sol_ms": v.sol_ms,
        "sol_fraction": m.sol_fraction(v),
        "warnings": list(v.warnings),
        "seconds": round(v.seconds, 1),
    }


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def markdown(
    rows: list[dict[str, Any]], verdicts: list[Verdict], todo: int, wall: float, command: str
) -> str:
    env = environment()
    lines = [
        "# Training level: shipped solutions by pass",
        "",
        f"{env.get('gpu') or 'CPU'}, torch {env.get('torch')}, triton {env.get('triton')}, Python "
        f"{env.get('python')}, {dt.date.today().isoformat()}. {len(rows)} of {todo} verdicts in {wall:.0f} s "
        f"(`{command}`).",
        "",
        "| solution | status | step ms | forward vs eager | backward vs eager | step vs eager | step vs compile | SOL fraction |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p = r["passes"]
        step = f"{r['step_ms']:.4g}" if r["step_ms"] is not None else "-"
        sol = f"{r['sol_fraction']:.3f}" if r["sol_fraction"] is not None else "-"
        lines.append(
            f"| {r['name']} | {r['status']} | {step} | {_x(p['forward']['eager'])} | {_x(p['backward']['eager'])} "
            f"| {_x(p['step']['eager'])} | {_x(p['step']['compile'])} | {sol} |"
        )
    found = pass_geomeans([v for v in verdicts if v.problem_key.startswith("kbench:")])
    lines += ["", "Geometric means over the ok suite verdicts (n: how many):", ""]
    for (pass_, mode), g in sorted(found.items()):
        lines.append(f"- {pass_} vs {mode}: {_x(g.value)} (n={g.n})")
    ok = sum(r["status"] == "ok" for r in rows)
    lines += ["", f"{ok} of {len(rows)} ok."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--backends", default="triton,cuda")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--preset", default="full")
    ap.add_argument("--slots", type=int, default=3)
    ap.add_argument("--cache-dir", type=Path, default=None)
    ap.add_argument("--max-seconds", type=float, default=480.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cfg = RunConfig(
        cache_dir=args.cache_dir or Path(tempfile.mkdtemp(prefix="kbench-training-")),
        device=args.device,
        preset=args.preset,
        baselines=list(MODES),
        gpu_slots=args.slots,
    )
    todo = jobs([b for b in args.backends.split(",") if b])
    rows: list[dict[str, Any]] = []
    judged: list[Verdict] = []
    log = (args.out / "training.jsonl").open("w")
    t0 = time.monotonic()
    with shared(cfg) as ev:
        tickets = ev.submit_many(submission for _, submission in todo)
        for i, v in verdicts(tickets, t0 + args.max_seconds, [name for name, _ in todo]):
            row = row_of(todo[i][0], v)
            rows.append(row)
            judged.append(v)
            log.write(json.dumps(row) + "\n")
            log.flush()
            print(f"{row['status']:>10} {row['name']} step {row['step_ms']} ({v.seconds:.0f} s)", flush=True)
    command = "python benchmarks/training_gpu.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k not in ("out", "cache_dir")
    )
    text = markdown(rows, judged, len(todo), time.monotonic() - t0, command)
    (args.out / "training.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
