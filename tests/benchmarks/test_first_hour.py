"""benchmarks/first_hour.py: what it reads from the logs of `make run` and `make test`, and its report."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import first_hour  # noqa: E402


def test_it_reads_the_closing_lines_of_both_commands() -> None:
    test_log = "....\n==== slowest 25 durations ====\n12.0s call tests/x.py::t\n=== 1790 passed, 37 skipped in 401.2s (0:06:41) ===\n"
    assert first_hour.pytest_summary(test_log) == "1790 passed, 37 skipped"
    assert first_hour.pytest_summary("== 3 failed, 1790 passed in 9.0s ==\n") == "3 failed, 1790 passed"
    assert first_hour.pytest_summary("no tests ran\n") is None
    quiet = "3 failed, 1269 passed, 30 skipped, 14 warnings in 4286.85s (1:11:26)\n"  # under -q: no frame
    assert first_hour.pytest_summary(quiet) == "3 failed, 1269 passed, 30 skipped, 14 warnings"
    run_log = "kbench:2/2 cpp s0t0 ok\nrun 20261205-073552-3648: 7 new verdicts, 0 kept from before; store x; report y\n"
    assert first_hour.run_summary(run_log) == "run 20261205-073552-3648: 7 verdicts"


def test_the_report_is_one_table_row_per_command(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 2048)
    assert first_hour.folder_bytes(tmp_path) == 2048
    step = {
        "rc": 0,
        "seconds": 330.0,
        "cpu_seconds": 540.0,
        "load_before": 0.5,
        "load_after": 2.0,
        "venv_bytes": 2**30,
        "result": "r",
    }
    text = first_hour.report({"make run": step}, "abc1234", "nothing else ran")
    assert text.splitlines()[0] == "# The first hour: make run and make test on a fresh clone"
    assert "| `make run` | 5.5 min (330 s) | 9.0 min | 0 | r | 1.00 GiB | 0.50 / 2.00 |" in text
