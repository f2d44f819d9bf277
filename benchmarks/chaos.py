"""Chaos: `kbench run` killed with SIGKILL at a random moment, then resumed, N times.

    python benchmarks/chaos.py --cycles 20 --out OUT/chaos.md [--record]

The main job on this machine (`kbench run --solutions reference`: the C++ solutions on the CPU's `small`
preset, or the CUDA and Triton ones on a GPU) runs once to completion for the reference time and the
expected verdicts (builds and reference caches warm). Then each cycle starts a new run, kills kbench
with SIGKILL at a moment drawn uniformly over that reference time, counts the processes of the killed
run still alive 2 s later, and resumes the run with `--resume` to completion. Reported per cycle and in
all: verdicts lost (expected but absent after the resume) and duplicated (recorded twice for one key),
processes left over, and the time the kill and the resume add over one uninterrupted run.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import common

from kbench.hardware import environment
from kbench.sandbox import procs

KBENCH = [sys.executable, "-c", "from kbench.cli import main; main()"]


@dataclass
class Cycle:
    kill_at_s: float
    kept_at_kill: int
    leftover: list[str]
    resume_s: float
    lost: int
    duplicated: int

    @property
    def added_s(self) -> float:
        return self.kill_at_s + self.resume_s


def _run(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*KBENCH, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip


def _keys(store: Path, run_id: str) -> list[tuple[str, ...]]:
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT problem_key, sample, turn, backend, model FROM verdicts WHERE run_id = ?", (run_id,)
        ).fetchall()
    return [tuple(map(str, row)) for row in rows]


def _complete(args: list[str], env: dict[str, str]) -> float:
    t0 = time.monotonic()
    proc = _run(args, env)
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"kbench {' '.join(args)} failed ({proc.returncode}):\n{err.decode()[-3000:]}")
    return time.monotonic() - t0


def cycle(i: int, full_s: float, expected: set[tuple[str, ...]], store: Path, env: dict[str, str]) -> Cycle:
    run_id = f"chaos-{i:02d}-{os.getpid()}"
    kill_at = random.uniform(0.0, full_s)
    proc = _run(["run", "--solutions", "reference"], {**env, "KBENCH_RUN_ID": run_id})
    owner = procs.ProcRef.of(proc.pid)
    time.sleep(kill_at)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(2.0)
    leftover = (
        [f"{pid} {procs.command(pid)[:120]}" for pid in procs.belonging_to(owner, proc.pid)] if owner else []
    )
    kept = len(_keys(store, run_id)) if store.exists() else 0
    try:
        resume_s = _complete(["run", "--solutions", "reference", "--resume", run_id], env)
    except SystemExit as exc:
        if "no run" not in str(exc).lower():
            raise
        # Killed before the run was opened: nothing to resume, the user starts it again.
        resume_s = _complete(["run", "--solutions", "reference"], {**env, "KBENCH_RUN_ID": run_id})
    keys = _keys(store, run_id)
    lost = len(expected - set(keys))
    return Cycle(kill_at, kept, leftover, resume_s, lost, len(keys) - len(set(keys)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    common.add_record_argument(parser)
    args = parser.parse_args()
    random.seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="kbench-chaos-") as tmp:
        store = Path(tmp) / "kbench.db"
        env = {**os.environ, "KBENCH_STORE": str(store)}
        _complete(["run", "--solutions", "reference"], {**env, "KBENCH_RUN_ID": "warm"})  # builds, caches
        full_s = _complete(["run", "--solutions", "reference"], {**env, "KBENCH_RUN_ID": "full"})
        expected = set(_keys(store, "full"))
        cycles = []
        for i in range(args.cycles):
            cycles.append(cycle(i, full_s, expected, store, env))
            c = cycles[-1]
            print(f"cycle {i}: killed at {c.kill_at_s:.1f} s with {c.kept_at_kill} verdicts, resume {c.resume_s:.1f} s, "
                  f"lost {c.lost}, duplicated {c.duplicated}, leftover {len(c.leftover)}", flush=True)  # fmt: skip
    write(args.out, full_s, len(expected), cycles)
    common.record_markdown(args.record, "chaos", args.out.read_text())


def write(out: Path, full_s: float, expected: int, cycles: list[Cycle]) -> None:
    env = environment()
    added = [c.added_s - full_s for c in cycles]
    lines = [
        f"# Chaos: SIGKILL at a random moment, then `--resume` ({common.utc_now()})",
        "",
        f"kbench {env.get('kbench')}, torch {env.get('torch')}, python {env.get('python')}, "
        f"{env.get('cpu')}, gpu {env.get('gpu')}",
        "",
        f"`python benchmarks/chaos.py --cycles {len(cycles)}`: the main job (`kbench run --solutions reference`, "
        f"{expected} verdicts) took {full_s:.1f} s uninterrupted with warm caches.",
        "",
        f"- verdicts lost: **{sum(c.lost for c in cycles)}**, duplicated: **{sum(c.duplicated for c in cycles)}** "
        f"over {len(cycles)} kills",
        f"- processes of a killed run alive 2 s after its SIGKILL: **{sum(len(c.leftover) for c in cycles)}**",
        f"- time added by a kill and its resume over one uninterrupted run (killed part + resume - {full_s:.1f} s): "
        f"median {statistics.median(added):.1f} s, max {max(added):.1f} s",
        "",
        "| cycle | killed at s | verdicts kept | resume s | added s | lost | duplicated | leftover |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, (c, a) in enumerate(zip(cycles, added, strict=True)):
        lines.append(
            f"| {i} | {c.kill_at_s:.1f} | {c.kept_at_kill} | {c.resume_s:.1f} | {a:.1f} | {c.lost} | "
            f"{c.duplicated} | {len(c.leftover)} |"
        )
    leftovers = [p for c in cycles for p in c.leftover]
    if leftovers:
        lines += ["", "Left over:", *(f"- `{p}`" for p in leftovers)]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())


if __name__ == "__main__":
    main()
