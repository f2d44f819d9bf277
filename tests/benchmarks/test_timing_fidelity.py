"""benchmarks/timing_fidelity.py: statistics, report, ncu parsing, call splitting, private cache folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import timing_fidelity as tf  # noqa: E402
import timing_fidelity_profile as tfp  # noqa: E402
import timing_fidelity_report as tfr  # noqa: E402


def _timing(problem: str, rnd: int, role: str, ms: float, **kw: object) -> dict:
    row = {"kind": "timing", "problem": problem, "round": rnd, "role": role, "status": "ok"}
    return row | {"median_ms": ms, "rse": 0.001, "n": 40, "wall_s": 3.0, "clocks_moved": False} | kw


def _rows() -> list[dict]:
    return [
        _timing("kbench:2/1", 1, "reference", 1.000),
        _timing("kbench:2/1", 2, "reference", 1.002),  # 0.2 %
        _timing("kbench:2/1", 1, "candidate", 0.500),
        _timing("kbench:2/1", 2, "candidate", 0.510, wall_s=7.5),  # 2 %, slow
        _timing("kbench:2/2", 1, "reference", 2.0),
        _timing("kbench:2/2", 2, "reference", 2.0),
        _timing("kbench:2/2", 1, "candidate", 0.100, clocks_moved=True),
        {"kind": "timing", "problem": "kbench:2/2", "round": 2, "role": "candidate", "status": "runtime_error",
         "error": "boom", "wall_s": 1.0},
        {"kind": "profile", "problem": "kbench:2/1", "single_kernel": True, "kernel_ms_median": 0.5,
         "kernels_per_call_set": [1]},
        {"kind": "profile", "problem": "kbench:2/2", "single_kernel": False, "kernel_ms_median": 0.05,
         "kernels_per_call_set": [2]},
    ]  # fmt: skip


def test_rel_diff_is_relative_to_the_smaller_time() -> None:
    assert tfr.rel_diff(1.0, 1.02) == pytest.approx(0.02)
    assert tfr.rel_diff(1.02, 1.0) == pytest.approx(0.02)
    assert tfr.rel_diff(None, 1.0) is None


def test_p90_is_nearest_rank() -> None:
    assert tfr.p90([float(i) for i in range(1, 31)]) == 27.0
    assert tfr.p90([5.0]) == 5.0


def test_table_and_summary_pair_rounds_and_flag_misses() -> None:
    rows = _rows()
    table = tfr.build_table(rows)
    by = {e["problem"]: e for e in table}
    assert by["kbench:2/1"]["reference"]["rel_diff"] == pytest.approx(0.002)
    assert by["kbench:2/1"]["candidate"]["rel_diff"] == pytest.approx(0.02)
    assert by["kbench:2/2"]["candidate"]["rel_diff"] is None  # round 2 failed: no pair
    assert by["kbench:2/1"]["agreement"]["ratio"] == pytest.approx(1.01)  # mean(0.5, 0.51) / 0.5
    assert "ratio" not in by["kbench:2/2"]["agreement"]  # two kernels per call: no agreement ratio
    s = tfr.summarize(table, rows)
    assert s["reference"]["meets"] == {"median": True, "p90": True, "max": True}
    assert s["candidate"]["over_max"] == ["kbench:2/1"]
    assert s["candidate"]["slow"] == ["kbench:2/1"]
    assert s["candidate"]["clocks_moved"] == ["kbench:2/2"]
    assert any("kbench:2/2 round 2 candidate: boom" in f for f in s["failures"])
    assert s["agreement"]["single_kernel"] == 1 and s["agreement"]["outside"] == []


def test_report_only_writes_markdown_from_the_jsonl(tmp_path: Path) -> None:
    (tmp_path / tf.ROWS).write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    tf.main(["--out", str(tmp_path), "--report-only", "--device", "cpu"])
    md = (tmp_path / "timing_fidelity.md").read_text()
    assert "| kbench:2/1 | 1 / 1.002 | 0.200% |" in md
    assert "over 1 % (max target): kbench:2/1" in md
    assert json.loads((tmp_path / "timing_fidelity_summary.json").read_text())["summary"]["problems"] == 2


def test_parse_ncu_csv_reads_units_and_skips_prof_lines() -> None:
    text = "\n".join(
        [
            "==PROF== Connected to process 123",
            '"ID","Kernel Name","gpu__time_duration.sum"',
            '"","","nsecond"',
            '"0","k(float*)","12,345"',
            '"1","k(float*)","12,000"',
        ]
    )
    assert tfp.parse_ncu_csv(text) == pytest.approx([0.012345, 0.012])
    assert tfp.parse_ncu_csv("no csv here") == []
    usec = '"ID","gpu__time_duration.sum"\n"","usecond"\n"0","2.5"'
    assert tfp.parse_ncu_csv(usec) == pytest.approx([0.0025])


def test_split_calls_uses_flush_kernels_as_separators() -> None:
    flush = {"flush_k"}
    events = [(0, 30.0, "flush_k"), (1, 5.0, "a"), (2, 30.0, "flush_k"), (3, 4.0, "a"), (4, 1.0, "b")]
    assert tfp.split_calls(events, flush) == [[(5.0, "a")], [(4.0, "a"), (1.0, "b")]]


def test_private_cache_shares_builds_and_keeps_them(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "builds" / "key").mkdir(parents=True)
    (shared / "reference").mkdir()
    private = tf.private_cache(shared)
    assert (private / "builds" / "key").is_dir()
    assert not (private / "reference").exists()  # the shared reference timings are not visible
    tf.drop_private(private)
    assert not private.exists() and (shared / "builds" / "key").is_dir()


@pytest.mark.gpu
def test_profile_item_sees_one_kernel_per_call() -> None:
    import torch

    flush = torch.zeros(2 * 2**20, dtype=torch.uint8, device="cuda")
    names = tfp.flush_names(flush)
    x = torch.randn(1 << 20, device="cuda")
    row = tfp.profile_item(torch.nn.ReLU(), [[x]], flush, names, 8)
    assert row["single_kernel"] and row["calls_seen"] == 8
    assert row["kernel_ms_median"] > 0
