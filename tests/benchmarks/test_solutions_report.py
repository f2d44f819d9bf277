"""benchmarks/solutions_report.py: the best solution per problem, the note where it does not beat
torch.compile, and the summary a whole-level run is judged by; plus a CPU dry run of the whole pipeline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import solutions_report as report  # noqa: E402


def _rows() -> dict[str, dict[int, dict]]:
    t = lambda ms: {"median_ms": ms}  # noqa: E731
    base = {
        # memory-bound, compile far from the floor, the Triton solution wins
        1: {
            "name": "Ew",
            "tags": ["elementwise-chain"],
            "bound": "memory",
            "sol_ms": 0.1,
            "eager": t(1.0),
            "compile": t(0.4),
            "eager_err64": 1e-7,
        },
        # compute-bound GEMM chain, nobody beats compile
        2: {
            "name": "Gemm",
            "tags": ["gemm-epilogue"],
            "bound": "compute",
            "sol_ms": 1.0,
            "eager": t(2.0),
            "compile": t(1.5),
        },
        # compile already at 90 % of the floor
        3: {
            "name": "Norm",
            "tags": ["norm-act"],
            "bound": "memory",
            "sol_ms": 0.9,
            "eager": t(3.0),
            "compile": t(1.0),
        },
        # no correct solution
        4: {"name": "Bad", "tags": [], "bound": "memory", "sol_ms": 0.1, "eager": t(1.0), "compile": t(0.5)},
    }
    cuda = {
        1: {"status": "ok", "time": t(0.2), "max_abs_err": 0.0, "err64": 2e-7},
        2: {"status": "ok", "time": t(1.5)},
        3: {"status": "ok", "time": t(1.005)},
        4: {"status": "mismatch", "max_abs_err": 1.0},
    }
    triton = {
        1: {"status": "ok", "time": t(0.125)},
        2: {"status": "ok", "time": t(1.6)},
        4: {"status": "mismatch"},
    }
    return {"baseline": base, "cuda": cuda, "triton": triton}


def test_best_is_the_faster_backend_and_notes_say_why_not_faster() -> None:
    table = report.build_table([1, 2, 3, 4], _rows())
    by_id = {e["problem"]: e for e in table}
    assert by_id[1]["best"]["backend"] == "triton" and by_id[1]["best"]["vs_eager"] == pytest.approx(8.0)
    assert by_id[1]["note"] == ""
    assert by_id[2]["best"]["backend"] == "cuda"
    assert "GEMM/convolution dominates" in by_id[2]["note"] and "67% of SOL" in by_id[2]["note"]
    assert by_id[3]["note"].endswith("(triton not timed in this run)")
    assert "already near the floor" in by_id[3]["note"]  # 1.005 ms vs 1.0: a tie within the noise floor
    assert by_id[4]["best"]["backend"] is None and by_id[4]["note"] == "no correct solution"
    assert by_id[3]["triton"]["status"] == "not run"


def test_summary_counts_the_best_per_problem() -> None:
    table = report.build_table([1, 2, 3, 4], _rows())
    best = report.summarize(table, ["cuda", "triton"])["best"]
    assert (best["correct"], best["of"]) == (3, 4)
    assert best["faster_than_compile"] == 1
    assert best["not_ok"] == {"none": [4]}
    assert report.summarize(table, ["cuda", "triton"])["triton"]["not_ok"] == {
        "not run": [3],
        "mismatch": [4],
    }
    cut = report.build_table([5], {"baseline": {5: {"eager": {"median_ms": 1.0}}}, "cuda": {}, "triton": {}})
    assert cut[0]["best"]["status"] == "not run" and cut[0]["note"] == "not timed in this run"
    assert report._ranges([7, 1, 2, 3, 9, 10]) == "1-3, 7, 9-10"
    assert best["geomean_vs_eager"] == pytest.approx((8.0 * (2.0 / 1.5) * (3.0 / 1.005)) ** (1 / 3))
    page = report.markdown(
        table,
        report.summarize(table, ["cuda", "triton"]),
        ["cuda", "triton"],
        {"date": "D", "torch": "T", "triton": "R", "cuda": "C", "gpu": "G", "preset": "full"},
    )
    assert "| 1_Ew | memory |" in page and "best solution per problem: 3 of 4 correct" in page
    assert "1.0e-07" in page and "2.0e-07" in page  # fp32 eager's error and the CUDA solution's, vs fp64


@pytest.mark.slow
def test_cpu_dry_run_of_the_whole_pipeline(tmp_path: Path) -> None:
    """`--device cpu --preset small` with the Triton interpreter: warm-up, the batches and the report."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "TMPDIR": str(tmp_path)}
    cmd = [
        sys.executable,
        str(BENCHMARKS / "solutions.py"),
        "--out",
        str(tmp_path / "out"),
        "--problems",
        "23,24",
        "--backends",
        "triton",
        "--device",
        "cpu",
        "--preset",
        "small",
        "--no-compile",
        "--budget-s",
        "0.01",
        "--jobs",
        "2",
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert json.loads((tmp_path / "out" / "machine.json").read_text())["date"] == results["meta"]["date"]
    assert [e["problem"] for e in results["table"]] == [23, 24]
    for e in results["table"]:
        assert e["triton"]["status"] == "ok" and e["best"]["backend"] == "triton"
        assert e["eager_err64"] is not None and e["triton"]["err64"] is not None
        assert e["triton"]["err64"] < 1e-4
    assert results["summary"]["best"]["correct"] == 2


def test_a_resumed_run_warms_only_what_is_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    import solutions

    (tmp_path / "logs").mkdir()
    (tmp_path / "baseline.jsonl").write_text('{"problem": 1}\n{"problem": 2}\n')
    (tmp_path / "triton.jsonl").write_text('{"problem": 1, "status": "ok"}\n')
    started: list[str] = []
    monkeypatch.setattr(solutions, "_sub", lambda argv, env, timeout_s, log: started.append(argv[1]) or 0)
    args = argparse.Namespace(
        out=str(tmp_path),
        backends=["triton"],
        no_compile=False,
        jobs=2,
        warm_timeout_s=1.0,
        device="cpu",
        preset="small",
        budget_s=0.01,
    )
    warmed = solutions.phase_warm(args, [1, 2, 3], {})
    assert sorted(started) == ["compile:3", "triton:2", "triton:3"]
    assert all(w["rc"] == 0 for w in warmed.values())


def test_a_backend_not_registered_here_is_refused_before_any_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each of its jobs would exit 2 and read as a crashed solution; the run says why instead."""
    import solutions

    monkeypatch.setattr(solutions, "_sub", lambda *a: pytest.fail("no job may start"))
    monkeypatch.setattr(sys, "argv", ["solutions.py", "--out", str(tmp_path), "--backends", "triton,nosuch"])
    with pytest.raises(SystemExit) as stop:
        solutions.main()
    assert stop.value.code == 2
    assert (
        "nosuch not a GPU backend registered here (cuda, cute, helion, tilelang, triton)"
        in capsys.readouterr().err
    )
