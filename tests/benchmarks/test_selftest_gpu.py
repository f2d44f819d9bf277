"""benchmarks/selftest_gpu.py: which jobs a GPU selftest call runs (no GPU needed to list them)."""

from __future__ import annotations

import sys
from pathlib import Path

from kbench.config import RunConfig

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import selftest_gpu  # noqa: E402


def test_controls_only_drops_the_fixtures_and_keeps_every_control_in_backend_order():
    base = RunConfig()
    every = selftest_gpu.jobs(["triton", "cuda"], base)
    controls = selftest_gpu.jobs(["triton", "cuda"], base, fixtures=False)
    kinds = lambda js: [j.tag[0] for j in js]  # noqa: E731
    assert "fixture" in kinds(every) and "fixture" not in kinds(controls)
    assert [j for j in every if j.tag[0] != "fixture"] == controls
    solutions = [j.candidate.backend for j in controls if j.tag[0] == "solution"]
    assert solutions and solutions == sorted(solutions, key=["triton", "cuda"].index)
    assert {"triton", "cuda"} == set(solutions)
