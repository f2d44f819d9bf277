"""End-to-end verdicts on CPU: an honest cpp candidate, a wrong one, and one fixture per protocol rule.

All cpp fixtures share one extension source, so the session builds it once (~30-60 s cold) and every
later worker loads it from the content-addressed cache.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from evalfixtures import FIXTURES, cpu_config, fixture_source, use_builds
from typer.testing import CliRunner

from kbench.evaluate.flow import evaluate
from kbench.problems import get_problem
from kbench.types import CPU_SAMPLE_PERIOD_NS, Candidate, Status

PROBLEM = "kbench:2/1"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> Path:
    return use_builds(tmp_path_factory.mktemp("kbench-cache"), shared_builds)


def run(name: str, cache_dir: Path, backend: str = "cpp", **kw: object):  # type: ignore[no-untyped-def]
    problem = get_problem(PROBLEM)
    cfg = cpu_config(cache_dir, backend=backend, **kw)
    return evaluate(problem, Candidate(problem.key, backend, fixture_source(name)), cfg)


@pytest.mark.slow
def test_honest_cpp_passes_with_speedup(cache_dir: Path) -> None:
    v = run("cpp_honest.py", cache_dir)
    assert v.status is Status.OK, v.message + v.log_tail
    assert v.correctness is not None and v.correctness.passed and len(v.correctness.seeds) == 4
    assert v.timing is not None and v.timing.n >= 10 and v.timing.method == "referee-batches"
    assert v.timing.loop is not None and v.timing.loop.checked >= 50  # checked against the reference
    assert v.speedup("eager") is not None and v.speedup("eager") > 0
    assert v.build is not None and "gemm_relu" in v.build.kernels
    # its GEMM does the work: sampled from outside, most of a call's CPU time is in its own extension
    unmeasured = [w for w in v.warnings if w.startswith("kernel share not measured")]
    assert (v.kernel_share or 0) > 0.5 or (v.kernel_share is None and unmeasured), (
        v.kernel_share,
        v.warnings,
    )
    again = run("cpp_honest.py", cache_dir, measure=False)
    assert again.status is Status.OK and again.build is not None and again.build.cache_hit


@pytest.mark.slow
def test_every_timed_batch_is_sampled_the_references_alike(cache_dir: Path) -> None:
    """The reference's timed batches and the candidate's are all sampled (a sparse period, the same on
    both sides), so no batch runs unsampled for a candidate that feels the sampling by its own slowdown
    (benchmarks/candidates/cpp_feels_sampling.py: PyTorch whenever it feels none): its timed calls' share
    is taken over the very calls that are timed, and a share that fell is `cheat no-custom-kernel`."""
    problem = get_problem(PROBLEM)
    attack = (Path(__file__).parents[2] / "benchmarks/candidates/cpp_feels_sampling.py").read_text()
    source = (FIXTURES / "_cpp_ext.py").read_text() + attack
    v = evaluate(problem, Candidate(problem.key, "cpp", source), cpu_config(cache_dir))
    assert v.status is Status.OK or (v.status is Status.CHEAT and v.rule == "no-custom-kernel"), v.message
    if v.kernel_share is None:
        pytest.skip(f"perf events refused here: {v.warnings}")
    # a cheat verdict (the attack felt no sampling on a loaded machine) keeps no timing
    if v.status is Status.OK:
        assert v.timing is not None
        loop = v.timing.loop
        assert loop is not None
        assert loop.watched_batches >= v.timing.n  # every timed batch (and any after, for samples)
        assert loop.timed_share_samples > 0  # the timed calls themselves were sampled and counted
    for mode, stats in v.baselines:  # the reference's loops pay the same sampling
        assert stats.provenance is not None and stats.loop is not None, mode
        settings = json.loads(stats.provenance.timing_settings)
        assert settings["sample_period_ns"] == CPU_SAMPLE_PERIOD_NS, mode
        if stats.provenance.source == "measured":
            # every timed batch, and the single-call ones after the loop (sampled alike)
            assert stats.loop.watched_batches == stats.n + stats.loop.single_calls, mode


def test_wrong_result_is_mismatch_with_report(cache_dir: Path) -> None:
    v = run("cpp_wrong.py", cache_dir, measure=False)
    assert v.status is Status.MISMATCH
    assert "first positions" in v.message and "expected" in v.message
    assert v.correctness is not None and v.correctness.max_abs_err > 0


@pytest.mark.parametrize(
    ("name", "status", "rule"),
    [
        ("cpp_inputs_mutated.py", Status.CHEAT, "inputs-mutated"),
        ("cpp_alias.py", Status.CHEAT, "output-aliases-input"),
        ("cpp_subclass.py", Status.CHEAT, "tensor-subclass"),
        ("cpp_global_state.py", Status.CHEAT, "global-state"),
        ("cpp_timer.py", Status.CHEAT, "timer-patched"),
        ("cpp_reference_patch.py", Status.CHEAT, "reference-patched"),
        ("cpp_no_kernel.py", Status.CHEAT, "no-custom-kernel"),
        ("cpp_child.py", Status.CHEAT, "child-process"),
        ("cpp_forged.py", Status.CRASHED, ""),
        ("py_segfault.py", Status.CRASHED, ""),
        ("py_exit0.py", Status.CRASHED, ""),
        ("py_raise.py", Status.RUNTIME_ERROR, ""),
        ("py_no_model.py", Status.LOAD_ERROR, ""),
        ("py_oom.py", Status.OOM, ""),
    ],
)
def test_protocol_rules_fire(cache_dir: Path, name: str, status: Status, rule: str) -> None:
    v = run(name, cache_dir, measure=False)
    assert (v.status, v.rule) == (status, rule), v.message + v.log_tail


def test_stale_timed_outputs_are_caught_by_the_checked_calls(cache_dir: Path) -> None:
    v = run("cpp_stale.py", cache_dir)
    assert (v.status, v.rule) == (Status.CHEAT, "timing-output-mismatch"), v.message


def test_beyond_speed_of_light(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    sol = SimpleNamespace(sol_ms=2e6, floor_ms=1e6)  # a roofline no kernel's time is above
    monkeypatch.setattr("kbench.evaluate.flow.speed_of_light", lambda *a: sol)
    v = run("cpp_honest.py", cache_dir)
    assert (v.status, v.rule) == (Status.CHEAT, "beyond-speed-of-light")


def _sleepers(marker: str, tag: str) -> list[int]:
    """Live processes running `marker` that inherited this test's `tag` (other test runs may share the box)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and marker in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                and tag.encode() in (entry / "environ").read_bytes()
            ):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def test_hang_times_out_and_group_is_killed(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tag = f"KBENCH_TEST_TAG={os.getpid()}-{time.monotonic_ns()}"
    monkeypatch.setenv(*tag.split("=", 1))  # the worker and its children inherit it
    v = run("py_hang.py", cache_dir, measure=False, timeout_s=120.0, correctness_timeout_s=5.0)
    assert v.status is Status.TIMEOUT and v.rule == "correctness"  # the verdict names the phase
    assert "correctness ran past its budget of 5 s (correctness_timeout_s)" in v.message
    assert v.seconds < 60  # the hung forward's own budget, not the load phase's 120 s
    assert _sleepers("sleep 300", tag) == []


def test_no_evaluation_starts_on_a_full_disk(cache_dir: Path) -> None:
    from kbench.errors import WorkerError

    with pytest.raises(
        WorkerError, match=r"not enough disk to evaluate: .* MiB free \(min_free_disk_gb: 1e\+09\)"
    ):
        run("cpp_wrong.py", cache_dir, measure=False, min_free_disk_gb=1e9)  # every disk is short of that
    assert run("cpp_wrong.py", cache_dir, measure=False, min_free_disk_gb=0).status is Status.MISMATCH


def test_a_failure_on_a_disk_that_filled_up_is_not_given(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A candidate's failure found with the disk full (checked after its job folder is gone) may be a build
    or a write that found no room: an error for the run, never a verdict against the candidate; a passing
    candidate's verdict stands."""
    from kbench.errors import WorkerError
    from kbench.evaluate import flow

    asked: list[int] = []

    def filling_up(cfg: object) -> str | None:
        asked.append(1)
        return None if len(asked) == 1 else "the cache has 12 MiB free"  # full by the end of the verdict

    monkeypatch.setattr(flow, "short_of_disk", filling_up)
    with pytest.raises(WorkerError, match=r"kbench:2/1: the candidate's mismatch came with a full disk"):
        run("cpp_wrong.py", cache_dir, measure=False)
    asked.clear()
    assert run("cpp_honest.py", cache_dir, measure=False).status is Status.OK
    assert len(asked) == 1  # an ok verdict is not asked about the disk again


def test_build_budget_is_its_own(cache_dir: Path) -> None:
    """A build that outlasts build_timeout_s is a timeout in phase build, and the candidate never runs."""
    v = run("cpp_honest.py", cache_dir / "cold", measure=False, build_timeout_s=1.0)
    assert v.status is Status.TIMEOUT and v.rule == "build", v.message
    assert "build_timeout_s" in v.message and v.build is not None and not v.build.ok
    assert not any(name.startswith("cand") for name, _ in v.phases)  # no candidate worker ran


@pytest.mark.slow
@pytest.mark.xdist_group("cpp-build-error")  # one worker compiles it, test_prebuild's reads the answer
def test_build_error(cache_dir: Path) -> None:
    v = run("cpp_build_error.py", cache_dir, measure=False)
    assert v.status is Status.BUILD_ERROR
    assert v.build is not None and v.build.log


def test_triton_passes_in_interpreter_and_compiles_for_sm90(cache_dir: Path) -> None:
    v = run("triton_honest.py", cache_dir, backend="triton", timing_budget_s=0.2)
    assert v.status is Status.OK, v.message + v.log_tail
    assert v.timing is not None and not v.timing.meaningful
    assert v.build is not None and "compiled for sm_90" in v.build.log


def test_triton_that_does_not_compile_is_build_error(cache_dir: Path) -> None:
    v = run("triton_bad_compile.py", cache_dir, backend="triton", measure=False)
    assert v.status is Status.BUILD_ERROR, v.message + v.log_tail


def test_cli_eval_json(cache_dir: Path) -> None:
    from kbench.cli import app

    env = {"KBENCH_CACHE_DIR": str(cache_dir)}
    args = ["eval", "--problem", PROBLEM, "--candidate", str(FIXTURES / "py_raise.py"), "--backend", "cpp"]
    args += ["--preset", "small", "--device", "cpu", "--no-static", "--no-timing", "--format", "json"]
    result = CliRunner().invoke(app, args, env=env | dict(os.environ))
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["status"] == "runtime_error" and "kernel launch failed" in data["message"]


def test_syntax_error_is_load_error_with_line(cache_dir: Path) -> None:
    problem = get_problem(PROBLEM)
    source = "import torch\n\n\nclass ModelNew(torch.nn.Module:\n    pass\n"
    v = evaluate(problem, Candidate(problem.key, "cpp", source), cpu_config(cache_dir, static_checks=True))
    assert (v.status, v.rule) == (Status.LOAD_ERROR, ""), v.message
    assert v.message.startswith("line 4:")


@pytest.mark.parametrize(("dtype", "warned"), [("fp32", True), ("fp16", False), ("bf16", False)])
def test_static_checks_see_the_problem_dtype(cache_dir: Path, dtype: str, warned: bool) -> None:
    from kbench.evaluate.flow import _static

    source = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.half()\n"
    cfg = cpu_config(cache_dir, static_checks=True, dtype=dtype)
    rules = {f.rule for f in _static(Candidate("p", "cpp", source), cfg).findings}
    assert ("precision-downgrade" in rules) is warned, rules


def test_evaluations_of_one_run_share_the_reference(cache_dir: Path) -> None:
    from kbench.evaluate.reference_pool import ReferencePool
    from kbench.store.reuse import source_of

    problem = get_problem(PROBLEM)
    cfg = cpu_config(cache_dir)
    pool = ReferencePool()
    first = evaluate(
        problem, Candidate(problem.key, "cpp", fixture_source("cpp_honest.py")), cfg, references=pool
    )
    wrong = evaluate(
        problem, Candidate(problem.key, "cpp", fixture_source("cpp_wrong.py")), cfg, references=pool
    )
    assert first.status is Status.OK, first.message + first.log_tail
    assert wrong.status is Status.MISMATCH, wrong.message
    assert (pool.runs, pool.reuses) == (1, 1)
    assert any(k.startswith("ref:") for k, _ in first.phases)
    # the reference worker's steps, its model's move to the device (a GPU's CUDA start) among them
    assert {"ref:construct", "ref:device", "ref:outputs"} <= {k for k, _ in first.phases}
    assert not any(k.startswith("ref:") for k, _ in wrong.phases)  # no second reference worker
    # a baseline timed by this run's first evaluation says so; one read from the disk cache stays "cache"
    first_source = source_of(dict(first.baselines)["eager"])
    assert source_of(dict(wrong.baselines)["eager"]) == ("run" if first_source == "measured" else "cache")
    # the shared secret seed is the same in both verdicts; a new pool draws a new one
    assert first.correctness is not None and wrong.correctness is not None
    assert first.correctness.seeds == wrong.correctness.seeds
    other = evaluate(
        problem,
        Candidate(problem.key, "cpp", fixture_source("cpp_honest.py")),
        cfg,
        references=ReferencePool(),
    )
    assert other.correctness is not None and other.correctness.seeds != first.correctness.seeds


def test_a_prefetched_reference_serves_the_evaluation_from_the_pool(cache_dir: Path) -> None:
    from kbench.evaluate.reference_pool import ReferencePool
    from kbench.evaluate.shared_reference import prefetch_reference

    problem = get_problem(PROBLEM)
    cfg = cpu_config(cache_dir)
    pool = ReferencePool()
    phases = prefetch_reference(problem, cfg.model_copy(update={"backend": "cpp"}), pool)
    assert (pool.runs, pool.reuses, len(pool)) == (1, 0, 1)
    assert phases is not None and phases["wall"] > 0 and "outputs" in phases  # where the run's time went
    v = evaluate(
        problem, Candidate(problem.key, "cpp", fixture_source("cpp_honest.py")), cfg, references=pool
    )
    assert v.status is Status.OK, v.message + v.log_tail
    assert (pool.runs, pool.reuses) == (1, 1)  # the same key: the evaluation ran no reference of its own
    assert not any(k.startswith("ref:") for k, _ in v.phases)
    assert v.speedup("eager") is not None  # the prefetched run's baseline timing


def test_a_reference_that_dies_says_how(cache_dir: Path) -> None:
    """A reference worker that ends without a result names its exit code (or signal) and its empty log."""
    from dataclasses import replace

    from kbench.errors import ProblemError

    problem = get_problem(PROBLEM)
    dying = problem.code.replace(
        "super().__init__()", "super().__init__()\n        import os\n        os._exit(3)", 1
    )
    assert dying != problem.code
    problem = replace(problem, code=dying)
    cfg = cpu_config(cache_dir, backend="triton", measure=False)
    with pytest.raises(
        ProblemError, match="reference failed: crashed: the runner exited with code 3 before answering"
    ):
        evaluate(problem, Candidate(problem.key, "triton", fixture_source("triton_honest.py")), cfg)
