"""benchmarks/trivial_sweep.py on the CPU: the Markdown table, its JSON lines and the exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_small_presets_on_the_cpu_write_the_table(tmp_path: Path) -> None:
    out = tmp_path / "sweep.md"
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "trivial_sweep.py"),
        "--preset",
        "small",
        "--device",
        "cpu",
    ]
    done = subprocess.run(
        [*cmd, "--out", str(out), "1/1", "2/1"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    table = out.read_text().splitlines()
    assert table[2].startswith("| key | name | tol | ref vs fp64 | zeros |")
    assert [line.split(" | ")[0] for line in table[4:6]] == ["| kbench:1/1", "| kbench:2/1"]
    assert "2 problems" in table[-1] and "0 where a trivial answer passes" in table[-1]
    rows = [json.loads(line) for line in out.with_suffix(".jsonl").read_text().splitlines()]
    assert [r["problem_key"] for r in rows] == ["kbench:1/1", "kbench:2/1"]
    assert all(r["reference_error"] is not None and not r["passing"] for r in rows)
