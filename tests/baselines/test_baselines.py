"""Baselines: measured once per hardware/torch and reused, and upstream KernelBench JSON in and out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from kbench.baselines import storage as b
from kbench.errors import ConfigError
from kbench.store import Store
from kbench.types import Problem, TimingStats, UpstreamFacts

WHERE = b.Where("full", "fp32", "fp-h200", "2.13.0")
PROBLEMS = [Problem("kbench", 2, 1, "Gemm_ReLU", "a"), Problem("kbench", 2, 2, "Conv2d_ReLU", "b")]


class FakeTimer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def __call__(self, p: Problem, preset: str, dtype: str, modes: Sequence[str]) -> dict[str, TimingStats]:
        self.calls.append((p.key, tuple(modes)))
        return {m: TimingStats(1.0 + i, 1.0, 0.01, 0.0, 0.9, 100, 0.001) for i, m in enumerate(modes)}


def test_measure_stores_then_reuses(tmp_path: Path) -> None:
    store, timer = Store(tmp_path / "k.db"), FakeTimer()
    first = b.measure(store, PROBLEMS, ["eager", "compile"], timer, WHERE)
    assert [o.reused for o in first] == [False] * 4 and len(timer.calls) == 2
    again = b.measure(store, PROBLEMS, ["eager", "compile", "compile-max-autotune"], timer, WHERE)
    assert sum(o.reused for o in again) == 4
    assert timer.calls[2:] == [
        ("kbench:2/1", ("compile-max-autotune",)),
        ("kbench:2/2", ("compile-max-autotune",)),
    ]
    other_gpu = b.Where("full", "fp32", "fp-a100", "2.13.0")
    assert b.stored_baselines(store, "kbench:2/1", ["eager"], other_gpu) == {}
    b.measure(store, PROBLEMS[:1], ["eager"], timer, WHERE, force=True)
    assert timer.calls[-1] == ("kbench:2/1", ("eager",))


def test_unknown_mode_and_missing_timing_are_errors(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    with pytest.raises(ConfigError, match="known: eager"):
        b.measure(store, PROBLEMS, ["jit"], FakeTimer(), WHERE)
    with pytest.raises(ConfigError, match="no 'eager' timing"):
        b.measure(store, PROBLEMS, ["eager"], lambda *a: {}, WHERE)


UPSTREAM = {
    "level1": {"19_ReLU.py": {"mean": 0.0201, "std": 0.002, "min": 0.018, "max": 0.031, "num_trials": 100,
                              "hardware": "NVIDIA H100", "device": "cuda:0"}},
    "level2": {"1_Conv2D_ReLU_BiasAdd.py": {"mean": 0.25, "std": 0.01, "min": 0.24, "max": 0.3,
                                            "num_trials": 100, "hardware": "NVIDIA H100", "device": "cuda:0"}},
}  # fmt: skip


def test_import_upstream_json(tmp_path: Path) -> None:
    path = tmp_path / "H100_Modal" / "baseline_time_torch_compile_inductor_default.json"
    path.parent.mkdir()
    path.write_text(json.dumps(UPSTREAM))
    store = Store(tmp_path / "k.db")
    assert b.import_upstream(store, path, WHERE) == 2
    stats = store.get_baseline("hf:1/19", "full", "fp32", "compile", "fp-h200", "2.13.0")
    assert stats is not None
    assert (stats.mean_ms, stats.std_ms, stats.min_ms, stats.n, stats.method) == (
        0.0201,
        0.002,
        0.018,
        100,
        "upstream",
    )
    assert stats.rse == pytest.approx(0.002 / 0.0201 / 10)  # std / mean / sqrt(100)
    # what the file said beside the statistics, kept through the store: its max, no median (mean stands in)
    assert stats.upstream == UpstreamFacts(hardware="NVIDIA H100", max_ms=0.031, median_known=False)
    assert store.get_baseline("hf:2/1", "full", "fp32", "compile", "fp-h200", "2.13.0") is not None


def test_export_round_trips_through_upstream_shape(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    store.put_problems([Problem("hf", 1, 19, "ReLU", "x"), Problem("hf", 2, 1, "Conv2D_ReLU_BiasAdd", "y")])
    src = tmp_path / "baseline_time_torch.json"
    src.write_text(json.dumps(UPSTREAM))
    b.import_upstream(store, src, WHERE)
    [out] = b.export_upstream(store, tmp_path / "out", WHERE, "NVIDIA H100", ["eager"])
    assert out.name == "baseline_time_torch.json"
    assert json.loads(out.read_text()) == UPSTREAM


def test_bad_upstream_files_are_clear_errors(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    bad = tmp_path / "baseline_time_torch.json"
    bad.write_text(json.dumps({"problems": {}}))
    with pytest.raises(ConfigError, match="'level1'"):
        b.import_upstream(store, bad, WHERE)
    with pytest.raises(ConfigError, match="pass --mode"):
        b.mode_of(tmp_path / "times.json")


def test_one_registry_of_modes_for_timing_and_upstream_files(tmp_path: Path) -> None:
    from kbench.baselines.modes import MODES, TIMED_MODES, check_modes, modes_for

    assert set(b.UPSTREAM_FILES) == set(MODES) and set(TIMED_MODES) < set(MODES)
    assert check_modes(["compile-reduce-overhead"]) == ["compile-reduce-overhead"]  # imported and exported
    with pytest.raises(ConfigError, match="unknown timed baseline mode.*compile-reduce-overhead"):
        check_modes(["compile-reduce-overhead"], timed=True)  # the worker cannot time it: refused up front
    with pytest.raises(ConfigError, match="unknown timed baseline"):
        b.measure(Store(tmp_path / "k.db"), PROBLEMS, ["compile-reduce-overhead"], FakeTimer(), WHERE)
    assert modes_for(["eager", "compile-max-autotune"], on_gpu=False) == ["eager"]
    assert modes_for(["eager", "compile-max-autotune"], on_gpu=True) == ["eager", "compile-max-autotune"]


def test_export_names_each_statistic_as_what_it_is(tmp_path: Path) -> None:
    """A measured baseline: median 0.024 ms, mean 0.113 ms (one slow call among fast ones). The file's
    `mean` is the mean (what upstream's analysis divides) and `median` the median (what kbench's speedups
    divide); no `max` is made up where kbench kept none."""
    store = Store(tmp_path / "k.db")
    store.put_problems(PROBLEMS[:1])
    stats = TimingStats(0.024, 0.113, 0.9, 0.002, 0.021, 1000, 0.25, device="cuda")
    store.put_baseline("kbench:2/1", "full", "fp32", "eager", "fp-h200", "2.13.0", stats)
    [out] = b.export_upstream(store, tmp_path / "out", WHERE, "NVIDIA H200", ["eager"])
    entry = json.loads(out.read_text())["level2"]["1_Gemm_ReLU.py"]
    assert entry == {
        "mean": 0.113,
        "std": 0.9,
        "min": 0.021,
        "num_trials": 1000,
        "hardware": "NVIDIA H200",
        "device": "cuda",
        "median": 0.024,
    }
    again = b.from_upstream(entry)  # a file kbench wrote reads back with its median
    assert (again.median_ms, again.mean_ms) == (0.024, 0.113)
    assert b.to_upstream(again, "NVIDIA H200") == entry
