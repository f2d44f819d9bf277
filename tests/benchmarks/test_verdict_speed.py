"""benchmarks/verdict_speed.py's time limit: no problem starts that the time left would not cover."""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import verdict_speed  # noqa: E402


def test_a_problem_that_would_not_fit_is_left_out_and_named() -> None:
    clock = verdict_speed.Clock(limit_s=10.0)
    assert clock.fits("cold 2/1")
    clock.done(time.monotonic() - 4.0)  # the first problem took 4 s
    assert clock.fits("cold 2/3")  # 4 s of 10 used at most: another fits
    clock.t0 -= 7.0  # 7 s gone: 4 more would pass the limit
    assert not clock.fits("warm 2/23") and clock.left_out == ["warm 2/23"]
    assert verdict_speed.Clock(None).fits("anything")  # no limit


def test_the_report_names_what_was_left_out() -> None:
    result = {"args": {}, "env": {}, "cold": [], "left_out": ["big 2/36"]}
    assert "Not run (the call's time limit): big 2/36." in verdict_speed.report(result)


def test_the_report_gives_a_command_line_that_runs_and_no_folder_of_this_machine() -> None:
    given = {"cold": "", "big": "2/25", "max_seconds": "60.0", "record": "/some/results", "budget": "None"}
    result = {"args": given, "env": {}, "left_out": []}
    text = verdict_speed.report(result)
    assert "`python benchmarks/verdict_speed.py --big 2/25 --max-seconds 60.0`" in text
    assert "/some/results" not in text and "--max_seconds" not in text


def test_the_upstream_flow_on_equal_terms_reads_and_writes_its_own_bytecode(tmp_path: Path) -> None:
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/bin"}
    out = verdict_speed.bytecode_env(env, tmp_path / "pyc")
    assert out == {"PATH": "/bin", "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"  # the machine's own environment is left as it is


def test_the_report_gives_both_ratios() -> None:
    row = {
        "problem": "2/1",
        "output_mib": 32.0,
        "kbench": {"wall_s": 3.5, "status": "ok", "rule": "", "phases": {"cli": 1.0}, "accounted": 0.97},
        "upstream": {"wall_s": 5.0},
        "upstream_bytecode": {"wall_s": 3.9},
        "ratio": 0.7,
        "ratio_bytecode": 0.9,
    }
    text = verdict_speed.report({"args": {}, "env": {}, "cold": [row]})
    assert "wall: **0.70** over 1 problems; against the upstream flow with a bytecode folder too" in text
    assert "| 2/1 | 32.0 | 5.0 | 3.9 | 3.5 | 0.7 | 0.9 | ok | 97 % |" in text


def test_a_timing_loop_is_described_from_the_verdicts_stats() -> None:
    loop = {"stop": "budget", "warmup_s": 0.05, "warmup_calls": 40, "warmup_end": "settled", "wall_s": 0.41}
    stats = {"n": 265, "median_ms": 0.79, "loop": loop, "clock": None}
    assert verdict_speed._loop(stats) == {"n": 265, "median_ms": 0.79, "stop": "budget",
                                          "warmup": [0.05, 40, "settled"], "wall_s": 0.41}  # fmt: skip
    assert verdict_speed._loop(None) == {}  # no timing (a failed verdict)
