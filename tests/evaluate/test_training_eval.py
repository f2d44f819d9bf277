"""A training problem end to end on the CPU: the shipped C++ solution of 5/1 (RMSNorm, both passes in its
own kernels) is correct on its step, timed as a step and as a forward alone against the reference's step
and forward, and its passes show in the verdict, the terminal table and the HTML report."""

from __future__ import annotations

from pathlib import Path

import pytest
from evalfixtures import cpu_config, use_builds

from kbench.evaluate.flow import evaluate
from kbench.problems import get_problem
from kbench.report import passes
from kbench.solutions import shipped_candidate
from kbench.types import Status, Verdict


@pytest.fixture(scope="module")
def verdict(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> Verdict:
    problem = get_problem("kbench:5/1")
    candidate = shipped_candidate(problem, "cpp")
    assert candidate is not None
    cache_dir = use_builds(tmp_path_factory.mktemp("kbench-cache"), shared_builds)
    return evaluate(problem, candidate, cpu_config(cache_dir, baselines=["eager"], static_checks=True))


@pytest.mark.slow
def test_a_training_step_is_judged_on_its_outputs_and_gradients_and_timed_by_pass(verdict: Verdict) -> None:
    v = verdict
    assert v.status is Status.OK, (v.status, v.rule, v.message)
    assert v.correctness is not None and v.correctness.passed
    assert [name for name, _ in v.forward] == ["candidate", "eager"]
    step, forward = v.pass_ms("candidate", "step"), v.pass_ms("candidate", "forward")
    assert step is not None and forward is not None and 0 < forward
    backward = v.pass_ms("candidate", "backward")
    assert backward is None or abs(backward - (step - forward)) < 1e-9
    assert v.pass_speedup("step") == pytest.approx(v.speedup("eager"))
    eager_forward = dict(v.forward)["eager"].median_ms
    assert v.pass_speedup("forward") == pytest.approx(eager_forward / forward)
    lines = passes.pass_lines(v)
    assert lines[0].startswith(f"forward {forward:.4g} ms: ") and "x eager" in lines[0]
    assert lines[-1].startswith(f"step {step:.4g} ms: ")
    table = passes.passes_table([("cpp", [v])])
    assert "Training passes" in table and ">forward<" in table and "(n=1)" in table
