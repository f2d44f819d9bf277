"""The first steps off the quickstart's path answer with the fix, and output reads whole in a log."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kbench.cli import app
from kbench.cli.progress import speedup_text
from kbench.cli.run import RunPlan, _next_steps, _shipped, _uncertain_note
from kbench.config import RunConfig
from kbench.problems import get_problem
from kbench.types import Status, TimingStats, Verdict

runner = CliRunner()
KBENCH = [sys.executable, "-c", "from kbench.cli import main; main()"]


def _piped(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """`kbench ARGS` with stdout and stderr going to pipes, as in a log or `| less`."""
    clean = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | env
    return subprocess.run([*KBENCH, *args], capture_output=True, text=True, env=clean, timeout=300)


@pytest.mark.parametrize("args", [["--help"], ["show", "--help"], ["eval", "--help"]])
def test_help_shows_no_value_type_for_a_flag(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "--help" in result.output and "<bool>" not in result.output
    assert "<str>" in result.output or args == ["--help"]  # options that take a value still say which


def test_env_says_which_backends_run_here() -> None:
    result = runner.invoke(app, ["env", "--format", "json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    backends = info["backends"]
    # cute, helion, tilelang: plugins (entry points)
    assert sorted(backends) == ["cpp", "cuda", "cute", "helion", "tilelang", "triton"]
    if info["gpu"] is None:
        cuda = backends["cuda"]
        assert {k: cuda[k] for k in ("runs", "device", "here")} == {
            "runs": False,
            "device": None,
            "here": "no: needs a CUDA GPU, and torch sees none here",
        }
        assert backends["cpp"]["device"] == "cpu"
    # each says which version of its tool builds its kernels, where that tool is installed
    assert backends["triton"]["version"] == importlib.metadata.version("triton")
    for dsl, package in (("helion", "helion"), ("tilelang", "tilelang"), ("cute", "nvidia-cutlass-dsl")):
        assert backends[dsl]["version"] == importlib.metadata.version(package)
    if info["gpu"] is None:  # Helion in Triton's interpreter, TileLang compiled to C; CuTe only compiles
        for dsl, how in (("helion", "in Triton's interpreter"), ("tilelang", "compiled to C")):
            assert backends[dsl]["runs"] is True and backends[dsl]["device"] == "cpu"
            assert how in backends[dsl]["here"]
        assert backends["cute"]["runs"] is False and "compile for sm_90a here" in backends["cute"]["here"]
    compiler = shutil.which("c++") or shutil.which("g++")
    assert (backends["cpp"]["version"] is None) == (compiler is None)
    table = runner.invoke(app, ["env"])
    assert "backend cpp" in table.output and "backend cuda" in table.output


def test_a_missing_extra_is_named_with_its_brackets() -> None:
    code = "import sys; sys.modules['fastapi'] = None; from kbench.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "serve", "--port", "0"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: this feature needs the optional package 'fastapi'; install it with: pip install 'kbench[serve]'"
    )


def test_piped_tables_keep_their_natural_width() -> None:
    proc = _piped(["list", "--level", "2"])
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout  # rich cuts cells to fit 80 columns when it is not told otherwise
    assert max(len(line) for line in proc.stdout.splitlines()) > 80
    assert "Conv2d_Min_BiasAdd_Scale" in proc.stdout and "conv-epilogue, elementwise-chain" in proc.stdout


def test_list_by_shipped_solution_and_show_without_code() -> None:
    listed = runner.invoke(app, ["list", "--solutions", "cpp", "--format", "json"])
    keys = [row["key"] for row in json.loads(listed.output)]
    assert keys == [
        "kbench:2/2",
        "kbench:2/3",
        "kbench:2/23",
        "kbench:2/24",
        "kbench:2/25",
        "kbench:2/28",
        "kbench:2/36",
        *(f"kbench:5/{n}" for n in (1, 2, 8, 11, 13, 14, 20, 22, 23, 26, 28)),
    ]
    shown = runner.invoke(app, ["show", "2/2", "--preset", "small", "--no-code", "--no-shapes"])
    assert shown.exit_code == 0 and "Gemm_GELUTanh" in shown.output and "class Model" not in shown.output


def _verdict() -> Verdict:
    def stats(ms: float) -> TimingStats:
        return TimingStats(ms, ms, 0.0, 0.0, ms, 100, 0.0)

    return Verdict(
        Status.OK,
        "kbench:2/2",
        "cpp",
        "small",
        "fp32",
        "cpu",
        timing=stats(1.0),
        baselines=(("eager", stats(1.3)),),
    )


def test_an_uncertain_speedup_is_explained_where_it_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench import metrics

    # the interval as metrics.speedup gives it (from the timings' spread), chosen here
    monkeypatch.setattr(
        metrics, "speedup", lambda v, mode, statistic="median": metrics.Speedup(1.28, 0.96, 1.70)
    )
    text = speedup_text(_verdict(), "eager", floor=0.0)
    assert text == "  1.28x eager (uncertain: 95 % interval 0.96-1.70x holds 1x; not fast)"
    monkeypatch.setattr(
        metrics, "speedup", lambda v, mode, statistic="median": metrics.Speedup(1.5, 1.4, 1.6)
    )
    assert speedup_text(_verdict(), "eager", floor=0.0) == "  1.50x eager (fast)"


def test_the_main_job_says_what_it_evaluates_and_what_to_try_next() -> None:
    cfg = RunConfig(device="cpu", preset="small")
    plan = RunPlan(cfg, [get_problem("2/1"), get_problem("2/2"), get_problem("2/3")], ["cpp"])
    assert (
        _shipped(plan) == "the shipped solutions, cpp for 2 of the 3 problems selected (the others have none)"
    )
    steps = _next_steps(cfg, "RUN", shipped=True)
    assert steps.startswith(f"next: kbench report RUN --store {cfg.store} ")
    assert (
        "kbench eval --problem 2/2 --candidate src/kbench/suite/solutions/cpp/level2/2_Gemm_GELUTanh.py --backend cpp"
        in steps
    )


def test_a_cpu_run_of_the_shipped_solutions_takes_level_2_unless_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`make run` on a CPU: level 2's C++ solutions (about a minute on two cores), the training steps one
    `--level 5` away, as its notice says; whatever the user chose is kept."""
    from kbench import defaults

    monkeypatch.setattr(defaults, "gpu_present", lambda device: False)
    cfg, backends, notice = defaults.solutions_config(RunConfig())
    assert (cfg.level, cfg.device, cfg.preset, backends) == (2, "cpu", "small", ["cpp"])
    assert "add --level 5" in notice
    assert defaults.solutions_config(RunConfig(level=5))[0].level == 5
    chosen = defaults.solutions_config(RunConfig(problems=["5/1"]))
    assert chosen[0].level is None and chosen[0].problems == ["5/1"] and "--level 5" not in chosen[2]


def test_inspect_says_why_its_roofline_is_a_gpus() -> None:
    from kbench.analysis.gpus import detect_gpu

    result = runner.invoke(app, ["inspect", "2/1", "--no-compile"])
    assert result.exit_code == 0, result.output
    why = "no GPU here: SOL is an H100's"
    assert (why in result.output) == (detect_gpu() is None)


def test_a_backend_that_cannot_run_names_its_fix_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "triton", None)  # as if the triton extra were not installed
    monkeypatch.delenv("COLUMNS", raising=False)  # piped output: tables at their natural width
    fix = (
        "no: this feature needs the optional package 'triton'; install it with: pip install 'kbench[triton]'"
    )
    info = json.loads(runner.invoke(app, ["env", "--format", "json"]).output)
    triton = info["backends"]["triton"]
    assert {k: triton[k] for k in ("runs", "device", "here")} == {"runs": False, "device": None, "here": fix}
    table = runner.invoke(app, ["env"])
    assert table.exit_code == 0 and fix in table.output  # rich markup would have eaten "[triton]"


def test_the_closing_note_on_uncertain_speedups_counts_them() -> None:
    assert _uncertain_note(1).startswith(
        "1 speedup above is uncertain: its 95 % interval holds 1x, so it counts"
    )
    assert _uncertain_note(6).startswith(
        "6 speedups above are uncertain: their 95 % interval holds 1x, so they"
    )


def test_selftest_names_a_skipped_backends_fix_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    import kbench.selftest.runner as selftest_runner

    fix = "this feature needs the optional package 'cutlass'; install it with: pip install 'kbench[cute]'"
    monkeypatch.setattr(selftest_runner, "run_suite", lambda **_: [])
    monkeypatch.setattr(selftest_runner, "missing_backends", lambda root=None: {"cute": fix})
    monkeypatch.delenv("COLUMNS", raising=False)
    result = runner.invoke(app, ["selftest"])
    assert result.exit_code == 0, result.output
    assert f"skipped the cute fixtures: {fix}" in result.output  # rich markup would have eaten "[cute]"


def test_a_failed_verdicts_log_tail_is_shown_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    from dataclasses import replace

    from kbench.cli.evaluate import print_verdict

    log = "main.cpp:3:1: error: 'x' was not declared [-fpermissive]\n[/] [bold]not markup[/bold]"
    print_verdict(replace(_verdict(), status=Status.BUILD_ERROR, log_tail=log))
    out = capsys.readouterr().out
    assert "log tail:\n" + log in out and "[dim]" not in out
