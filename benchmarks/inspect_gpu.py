"""`kbench inspect --all --level 2 --measure-ceilings --preset full --device cuda`, in parallel shards, on a GPU.

    python benchmarks/inspect_gpu.py --out OUT [--shards 4]

A problem's inspection is mostly torch.compile's cold compile (seconds of CPU, a fresh Inductor cache so
the fusion log is complete) and a few milliseconds of profiled GPU work, so shards run at once and rarely
profile at the same moment; each shard measures its own ceilings (in its table's first line). Writes
OUT/inspect_level2.md (the merged table) and OUT/summary.md: how often eager is within 2x of SOL and how
often torch.compile's kernels beat eager's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

EAGER_OVER_SOL, EAGER_OVER_COMPILED = 9, 15  # columns of kbench inspect's table ("|"-split)


def _float(cell: str) -> float | None:
    cell = cell.strip()
    return None if cell in ("", "-") else float(cell)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--level", default="2")
    parser.add_argument("--preset", default="full")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS=os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "4"))
    t0 = time.monotonic()
    procs = []
    for i in range(args.shards):
        cmd = [sys.executable, "-m", "kbench", "inspect", "--all", "--level", args.level, "--measure-ceilings",
               "--preset", args.preset, "--device", "cuda", "--shard", f"{i}/{args.shards}",
               "--out", str(args.out / f"shard{i}.md")]  # fmt: skip
        log = (args.out / f"shard{i}.log").open("w")
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log))
        time.sleep(3)  # the next shard measures its ceilings after this one's
    codes = [p.wait() for p in procs]
    wall = time.monotonic() - t0
    heads, rows = [], []
    for i in range(args.shards):
        path = args.out / f"shard{i}.md"
        if not path.exists():
            continue
        lines = path.read_text().splitlines()
        heads.append(lines[0])
        header = lines[2:4]
        rows += [line for line in lines if line.startswith("| kbench:")]
    if not rows:
        print(f"no shard finished (exit codes {codes})")
        return 1
    rows.sort(key=lambda r: int(r.split("|")[1].strip().split("/")[1]))
    (args.out / "inspect_level2.md").write_text("\n".join([heads[0], "", *header, *rows]) + "\n")
    over_sol = [v for r in rows if (v := _float(r.split("|")[EAGER_OVER_SOL])) is not None]
    gains = [v for r in rows if (v := _float(r.split("|")[EAGER_OVER_COMPILED])) is not None]
    summary = [
        f"# kbench inspect, level {args.level}, preset {args.preset}, {len(rows)} problems",
        "",
        f"{args.shards} shards in parallel, {wall:.0f} s wall; exit codes {codes}; ceilings per shard:",
        *[f"- {h}" for h in heads],
        "",
        f"- eager within 2x of SOL: {sum(v <= 2.0 for v in over_sol)}/{len(over_sol)}",
        f"- torch.compile's kernels faster than eager's: {sum(v > 1.0 for v in gains)}/{len(gains)}"
        f" (by more than 10 %: {sum(v > 1.1 for v in gains)})",
    ]
    (args.out / "summary.md").write_text("\n".join(summary) + "\n")
    print("\n".join(summary))
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
