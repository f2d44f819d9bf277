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
