"""`kbench export --format kernelbench`: upstream KernelBench's result files, checked field by field as
upstream's own scripts read them, and the numbers those scripts would compute, by hand.

How upstream reads them (its repository, read for these facts; no code of it here):
- scripts/eval_from_generations.py, add_to_eval_results_file: eval_results.json maps str(problem_id) to
  a list of {"sample_id": int, "compiled": bool, "correctness": bool, "metadata": dict, "runtime": float
  (ms, -1.0 when not timed), "runtime_stats": dict}, ids in numeric order; fetch_kernel_from_disk reads
  level_{L}_problem_{P}_sample_{S}_kernel.py; calculate_pass_at_k writes pass_at_k_results.json as
  {"averages": {"avg_pass@k": float}, "metadata": {...}, "problems": {id: {"total_samples",
  "correct_samples", "pass@k"}}}, a sample passing when correct and compiled.
- src/kernelbench/timing.py, get_timing_stats: runtime_stats holds mean, std, min, max, num_trials,
  hardware, device; src/kernelbench/eval.py sets `runtime` to the stats' mean.
- scripts/benchmark_eval_analysis.py: keeps each problem's entry with sample_id 0 (at most one), counts a
  problem without one as not compiled and not correct, reads entry["compiled"], entry["correctness"],
  entry["runtime"] and baseline["level{L}"][<dataset file name>]["mean"]; src/kernelbench/score.py:
  fast_p = #(correct and baseline / runtime > p) / n over the n problems aligned with a baseline, and the
  geometric mean of baseline / runtime over the correct ones; the dataset's name of a problem is its file
  name, "19_ReLU.py" (src/kernelbench/dataset.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kbench import metrics as m
from kbench.cli import app
from kbench.report.upstream import choose, pass_at_k_results, upstream_pass_at_k
from kbench.store import Store, VerdictKey
from kbench.types import BuildResult, Correctness, Problem, Status, TimingStats, Verdict

SOURCE = "/data/KernelBench"
HW = {"gpu": "NVIDIA H200", "device": "cuda"}
RELU, GELU, CONV = f"{SOURCE}:1/19", f"{SOURCE}:1/26", f"{SOURCE}:2/1"


def _t(median: float, mean: float, std: float = 0.01) -> TimingStats:
    return TimingStats(median, mean, std, 0.0, median * 0.9, 100, 0.001, device="cuda:0")


def _v(key: str, status: Status, cand: TimingStats | None = None, eager: float = 0.0, **kw: Any) -> Verdict:
    base = (("eager", _t(eager, eager * 1.1)), ("compile", _t(eager / 2, eager / 2))) if eager else ()
    return Verdict(status, key, "cuda", "full", "fp32", "cuda:0", timing=cand, baselines=base, **kw)


GOOD = Correctness(True, (0, 1, 2, 3, 4, 99))
# ReLU: s0 t0 correct, mean speedup 0.022 / 0.01 = 2.2; s0 t1 correct (a later turn); s1 mismatch.
# GELU: s0 build error; s1 correct, mean speedup 0.11 / 0.2 = 0.55. CONV (level 2): s0 correct, 0.55 / 0.5.
VERDICTS = [
    (RELU, 0, 0, _v(RELU, Status.OK, _t(0.009, 0.01), 0.02, correctness=GOOD)),
    (RELU, 0, 1, _v(RELU, Status.OK, _t(0.004, 0.005), 0.02, correctness=GOOD)),
    (
        RELU,
        1,
        0,
        _v(
            RELU,
            Status.MISMATCH,
            correctness=Correctness(False, (0, 1), 0.5, 0.01, 2.0, "seed 0: x", seeds_passed=1),
        ),
    ),
    (GELU, 0, 0, _v(GELU, Status.BUILD_ERROR, build=BuildResult(False, "cuda", log="k.cu(3): error: x"))),
    (GELU, 1, 0, _v(GELU, Status.OK, _t(0.19, 0.2), 0.1, correctness=GOOD)),
    (CONV, 0, 0, _v(CONV, Status.OK, _t(0.45, 0.5), 0.5, correctness=GOOD)),
]


@pytest.fixture
def run(tmp_path: Path) -> tuple[Store, str]:
    store = Store(tmp_path / "k.db")
    store.put_problems(
        [
            Problem(SOURCE, 1, 19, "ReLU", ""),
            Problem(SOURCE, 1, 26, "GELU_", ""),
            Problem(SOURCE, 2, 1, "Conv2D", ""),
        ]
    )
    run = store.start_run({"model": "m", "samples": 2, "turns": 2, "protocol": "kernelbench"}, HW, "r")
    store.put_run_problems(run, [RELU, GELU, CONV])
    for key, sample, turn, v in VERDICTS:
        source = f"class ModelNew:  # {key} s{sample} t{turn}\n"
        store.record(
            run,
            VerdictKey(key, sample, turn, "cuda", "m"),
            v,
            "" if v.status is Status.BUILD_ERROR else source,
        )
    return store, run


def _export(store: Store, run: str, out: Path, *extra: str) -> None:
    result = CliRunner().invoke(
        app, ["export", run, "--store", str(store.path), "--format", "kernelbench", "--out", str(out), *extra]
    )
    assert result.exit_code == 0, result.output


def _analysis(
    eval_results: dict[str, Any], baseline: dict[str, Any], level: int, names: dict[int, str], p: float
) -> tuple[int, int, float, float]:
    """(compiled, correct, fast_p, geomean) as benchmark_eval_analysis.py computes them (module doc)."""
    first = {}
    for pid, entries in eval_results.items():
        zero = [e for e in entries if e["sample_id"] == 0]
        assert len(zero) <= 1
        first.update({pid: zero[0]} if zero else {})
    missing = {"compiled": False, "correctness": False, "runtime": -1.0}
    rows = [first.get(str(pid), missing) for pid in sorted(names)]
    compiled, correct = sum(r["compiled"] for r in rows), sum(r["correctness"] for r in rows)
    aligned = [
        (first.get(str(pid), missing), baseline[f"level{level}"][names[pid]]["mean"])
        for pid in sorted(names)
        if names[pid] in baseline[f"level{level}"]
    ]
    ratios = [b / e["runtime"] for e, b in aligned if e["correctness"]]
    fast = sum(r > p for r in ratios) / len(aligned)
    return compiled, correct, fast, math.prod(ratios) ** (1 / len(ratios)) if ratios else 0.0


def test_eval_results_field_by_field(run: tuple[Store, str], tmp_path: Path) -> None:
    store, run_id = run
    _export(store, run_id, tmp_path / "out")
    results = json.loads((tmp_path / "out" / "level1" / "eval_results.json").read_text())
    assert list(results) == ["19", "26"]  # str(problem id), in numeric order; level 2 has its own file
    for entries in results.values():
        assert [e["sample_id"] for e in entries] == [0, 1]
        for e in entries:
            assert list(e) == ["sample_id", "compiled", "correctness", "metadata", "runtime", "runtime_stats"]
            assert isinstance(e["compiled"], bool) and isinstance(e["correctness"], bool)
            assert isinstance(e["runtime"], float) and isinstance(e["metadata"], dict)
    relu0, relu1 = results["19"]
    assert (relu0["compiled"], relu0["correctness"], relu0["runtime"]) == (True, True, 0.01)  # turn 0's mean
    assert relu0["runtime_stats"] == {"mean": 0.01, "std": 0.01, "min": 0.009 * 0.9, "num_trials": 100,
                                      "hardware": "NVIDIA H200", "device": "cuda:0", "median": 0.009}  # fmt: skip
    assert (
        relu0["metadata"]["correctness_trials"] == "(6 / 6)"
        and relu0["metadata"]["kbench_protocol"] == "kernelbench"
    )
    assert (relu1["compiled"], relu1["correctness"], relu1["runtime"], relu1["runtime_stats"]) == (
        True,
        False,
        -1.0,
        {},
    )
    assert (
        relu1["metadata"]["max_difference"] == ["0.500000"]
        and relu1["metadata"]["kbench_status"] == "mismatch"
        and relu1["metadata"]["correctness_trials"] == "(1 / 2)"
    )
    gelu0 = results["26"][0]
    assert (gelu0["compiled"], gelu0["correctness"], gelu0["runtime"]) == (False, False, -1.0)
    assert "error: x" in gelu0["metadata"]["compilation_error"]
    kernels = sorted(p.name for p in (tmp_path / "out" / "level1").glob("*_kernel.py"))
    assert kernels == ["level_1_problem_19_sample_0_kernel.py", "level_1_problem_19_sample_1_kernel.py",
                       "level_1_problem_26_sample_1_kernel.py"]  # fmt: skip
    assert "s0 t0" in (tmp_path / "out" / "level1" / "level_1_problem_19_sample_0_kernel.py").read_text()


def test_baselines_and_the_analysis_upstream_would_compute(run: tuple[Store, str], tmp_path: Path) -> None:
    """By hand, level 1 first attempts: ReLU correct with baseline mean 0.022 / runtime 0.01 = 2.2, GELU a
    build error: compiled 1, correct 1, fast_1 = 1/2, fast_2.5 = 0, geomean 2.2; upstream's dataset
    also holds problem 40, without a verdict (not compiled, not correct) and without a baseline (not
    aligned, as the analysis skips it)."""
    store, run_id = run
    out = tmp_path / "out"
    _export(store, run_id, out)
    eager = json.loads((out / "baseline_time_torch.json").read_text())
    assert sorted(eager) == ["level1", "level2"] and sorted(eager["level1"]) == ["19_ReLU.py", "26_GELU_.py"]
    assert (
        eager["level1"]["19_ReLU.py"]["mean"] == pytest.approx(0.022)
        and eager["level1"]["19_ReLU.py"]["median"] == 0.02
    )
    compiled = json.loads((out / "baseline_time_torch_compile_inductor_default.json").read_text())
    assert compiled["level2"]["1_Conv2D.py"]["mean"] == 0.25
    results = json.loads((out / "level1" / "eval_results.json").read_text())
    names = {19: "19_ReLU.py", 26: "26_GELU_.py", 40: "40_LayerNorm.py"}
    c, ok, fast1, geo = _analysis(results, eager, 1, names, 1.0)
    assert (c, ok, fast1, geo) == (1, 1, 0.5, pytest.approx(2.2))
    assert _analysis(results, eager, 1, names, 2.5)[2] == 0.0
    # the kbench report's first-attempt numbers under kernelbench rules agree
    report = CliRunner().invoke(
        app,
        [
            "report",
            run_id,
            "--store",
            str(store.path),
            "--no-html",
            "--protocol",
            "kernelbench",
            "--p",
            "1,2.5",
        ],
        env={"COLUMNS": "300"},
    )
    assert report.exit_code == 0, report.output
    level1 = next(
        line for line in report.output.splitlines() if line.startswith("│ level 1 │ first     │ eager")
    )
    cells = [c.strip() for c in level1.split("│")[1:-1]]
    assert cells == [
        "level 1",
        "first",
        "eager",
        "2",
        "1/2 (50%)",
        "1/2 (50%)",
        "2.20× over 1 problem",
        "50% (1/2)",
        "0% (0/2)",
    ]


def test_pass_at_k_results_with_unequal_sample_counts(run: tuple[Store, str], tmp_path: Path) -> None:
    """As upstream's calculate_pass_at_k (scripts/eval_from_generations.py) does it: a problem of n samples
    stores pass@min(k, n) for each k, and avg_pass@k sums the problems storing pass@k over every problem.
    By hand, level 1 with --k 1,2,3: ReLU 2 samples, 1 correct: pass@1 = 1/2, pass@2 = 1 (k = 3 lowered to
    2); GELU the same (its sample 0 did not compile); Softmax 1 sample, correct: pass@1 = 1 (k = 2, 3
    lowered to 1). avg_pass@1 = (1/2 + 1/2 + 1) / 3, avg_pass@2 = (1 + 1 + 0) / 3, avg_pass@3 = 0 / 3.
    Level 2: Conv2D's one sample of the 2 the run asked for, correct: pass@1 = 1, avg_pass@2 = 0 / 1."""
    store, run_id = run
    store.put_problems([Problem(SOURCE, 1, 23, "Softmax", "")])
    softmax = f"{SOURCE}:1/23"
    store.record(
        run_id, VerdictKey(softmax, 0, 0, "cuda", "m"), _v(softmax, Status.OK, _t(0.1, 0.1), 0.2), ""
    )
    _export(store, run_id, tmp_path / "out", "--k", "1,2,3")
    data = json.loads((tmp_path / "out" / "level1" / "pass_at_k_results.json").read_text())
    assert list(data) == ["averages", "metadata", "problems"]
    assert data["averages"] == {"avg_pass@1": pytest.approx(2 / 3), "avg_pass@2": pytest.approx(2 / 3),
                                "avg_pass@3": 0.0}  # fmt: skip
    assert data["problems"]["19"] == {"total_samples": 2, "correct_samples": 1, "pass@1": 0.5, "pass@2": 1.0}
    assert data["problems"]["23"] == {"total_samples": 1, "correct_samples": 1, "pass@1": 1.0}
    assert data["metadata"] == {"total_problems": 3, "problems_with_samples": 3, "total_evaluated_samples": 5,
                                "total_correct_samples": 3, "pass@1_count": 3, "pass@2_count": 2, "pass@3_count": 0}  # fmt: skip
    level2 = json.loads((tmp_path / "out" / "level2" / "pass_at_k_results.json").read_text())
    assert level2["averages"] == {"avg_pass@1": 1.0, "avg_pass@2": 0.0, "avg_pass@3": 0.0}
    assert level2["problems"] == {"1": {"total_samples": 1, "correct_samples": 1, "pass@1": 1.0}}


def test_pass_at_k_averages_divide_by_every_problem() -> None:
    """The audit's case, by hand: p1 2 samples, 1 correct; p2 1 sample, correct; k = 1, 2. pass@1 of p1 is
    1/2, pass@2 of p1 is 1; p2 stores only pass@1 = 1. avg_pass@1 = (1/2 + 1) / 2, avg_pass@2 = 1 / 2."""
    ok, bad = {"correctness": True, "compiled": True}, {"correctness": False, "compiled": True}
    data = pass_at_k_results({"1": [ok, bad], "2": [ok]}, [1, 2])
    assert data["averages"] == {"avg_pass@1": 0.75, "avg_pass@2": 0.5}
    assert data["problems"]["2"] == {"total_samples": 1, "correct_samples": 1, "pass@1": 1.0}
    assert (data["metadata"]["pass@1_count"], data["metadata"]["pass@2_count"]) == (2, 1)
    assert pass_at_k_results({"1": [ok] * 3 + [bad]}, [2])["problems"]["1"]["pass@2"] == 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(10, 3, 2), (7, 2, 3), (50, 17, 5), (4, 0, 2), (3, 3, 1)])
def test_pass_at_k_floats_are_upstreams_product(n: int, c: int, k: int) -> None:
    """Upstream's calc_pass_at_k takes 1 - prod(1 - k / i) over i = n-c+1 .. n with numpy, whose float can
    differ in the last bit from 1 - C(n-c, k) / C(n, k); the file holds upstream's float."""
    np = pytest.importorskip("numpy")
    assert upstream_pass_at_k(n, c, k) == (
        1.0 if n - c < k else 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))
    )
    assert upstream_pass_at_k(n, c, k) == pytest.approx(m.pass_at_k(n, c, k))


def test_the_last_turn_can_stand_for_a_sample(run: tuple[Store, str], tmp_path: Path) -> None:
    store, run_id = run
    _export(store, run_id, tmp_path / "out", "--turn", "last")
    relu0 = json.loads((tmp_path / "out" / "level1" / "eval_results.json").read_text())["19"][0]
    assert relu0["runtime"] == 0.005  # turn 1's mean
    chosen = choose(store.records(run_id), turn=1)
    assert list(chosen) == [RELU] and list(chosen[RELU]) == [0]
    bad = CliRunner().invoke(app, ["export", run_id, "--store", str(store.path), "--format", "kernelbench"])
    assert "name their folder with --out" in str(bad.exception)


def test_baselines_list_problems_by_number_as_eval_results_do() -> None:
    """upstream's analysis pairs a level's baselines with its eval results by position: problems 1, 2 and
    10 are listed 1, 2, 10 in both (not 1, 10, 2 as their keys sort as text)."""
    from types import SimpleNamespace

    from kbench.report.upstream import baseline_files
    from kbench.store.records import ProblemMeta

    stats = TimingStats(
        median_ms=1.0, mean_ms=1.0, std_ms=0.0, iqr_ms=0.0, min_ms=1.0, n=3, rse=0.0, device="cuda"
    )
    verdict = SimpleNamespace(baseline=lambda mode: stats if mode == "eager" else None)
    keys = ["kbench:2/1", "kbench:2/10", "kbench:2/2"]
    chosen: Any = {k: {0: SimpleNamespace(verdict=verdict)} for k in keys}
    meta = {k: ProblemMeta(k, "kbench", 2, int(k.split("/")[1]), f"P{k.split('/')[1]}") for k in keys}
    files = baseline_files(chosen, meta, "H100")
    assert list(files["baseline_time_torch.json"]["level2"]) == ["1_P1.py", "2_P2.py", "10_P10.py"]
