"""Run `kbench inspect --all --level 2 --measure-ceilings --preset full --device cuda` and write its table to
benchmarks/results/inspect_level2.md, then print how often eager is within 2x of SOL (run on the GPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).parent / "results" / "inspect_level2.md"


def main() -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "kbench", "inspect", "--all", "--level", "2", "--measure-ceilings",
           "--preset", "full", "--device", "cuda", "--out", str(OUT)]  # fmt: skip
    proc = subprocess.run(cmd, check=False)
    if proc.returncode:
        return proc.returncode
    ratios = [
        line.split("|")[9].strip() for line in OUT.read_text().splitlines() if line.startswith("| kbench:")
    ]
    values = [float(r) for r in ratios if r != "-"]
    within = sum(1 for v in values if v <= 2.0)
    print(f"eager within 2x of SOL: {within}/{len(values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
