"""benchmarks/run.py: a measurement's command line, its arguments replaced by NAME=ARGS."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import run  # noqa: E402


def test_given_arguments_replace_the_defaults_and_the_script_stays(tmp_path: Path) -> None:
    argv = run.command("timing-fidelity", "--out {out} --problems 2", tmp_path / "o", tmp_path / "c", None)
    assert argv == [run.PY, "benchmarks/timing_fidelity.py", "--out", str(tmp_path / "o"), "--problems", "2"]


def test_the_script_named_again_in_the_arguments_is_taken_once(tmp_path: Path) -> None:
    given = "benchmarks/timing_fidelity.py --out {out} --problems 2"
    argv = run.command("timing-fidelity", given, tmp_path / "o", tmp_path / "c", None)
    assert argv == [run.PY, "benchmarks/timing_fidelity.py", "--out", str(tmp_path / "o"), "--problems", "2"]
    module = run.command("gpu-tests", "-m pytest -q tests/worker", tmp_path, tmp_path, None)
    assert module == [run.PY, "-m", "pytest", "-q", "tests/worker"]


def test_a_measurements_name_after_record_is_a_name_not_the_results_folder(tmp_path: Path) -> None:
    args = run.arguments(["--out", str(tmp_path), "--record", "worker-start", "walls"])
    assert args.names == ["worker-start", "walls"] and args.record == run.RESULTS
    args = run.arguments(["--record", str(tmp_path), "worker-start"])  # a folder stays the folder
    assert args.names == ["worker-start"] and args.record == tmp_path
