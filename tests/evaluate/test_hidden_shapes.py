"""--hidden-shapes end to end on CPU: the candidate runs again, in fresh sandboxed jobs, at sizes drawn for
the evaluation; an honest kernel generalizes, one written for the prompt's sizes does not, and one that
falls back to PyTorch at unseen sizes is a cheat."""

from __future__ import annotations

from pathlib import Path

import pytest
from evalfixtures import cpu_config, fixture_source, use_builds

from kbench.evaluate.flow import evaluate
from kbench.problems import get_problem
from kbench.types import Candidate, Status, Verdict

PROBLEM = "kbench:2/1"  # small preset: batch_size 16, in_features 64 (both shape the input)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> Path:
    return use_builds(tmp_path_factory.mktemp("kbench-cache"), shared_builds)


def run(name: str, cache_dir: Path, **kw: object) -> Verdict:
    problem = get_problem(PROBLEM)
    cfg = cpu_config(cache_dir, measure=False, **kw)
    return evaluate(problem, Candidate(problem.key, "cpp", fixture_source(name)), cfg)


@pytest.mark.slow
def test_an_honest_kernel_generalizes(cache_dir: Path) -> None:
    v = run("cpp_honest.py", cache_dir, hidden_shapes=True)
    assert v.status is Status.OK and v.generalizes is True, (v.message, v.hidden)
    assert v.hidden.startswith("at hidden sizes ") and "passed" in v.hidden
    assert "batch_size=" in v.hidden and "in_features=" in v.hidden and "out_features" not in v.hidden
    assert dict(v.phases).get("hidden", 0) > 0


def test_without_the_flag_nothing_is_checked(cache_dir: Path) -> None:
    v = run("cpp_honest.py", cache_dir)
    assert v.status is Status.OK and v.generalizes is None and v.hidden == ""


def test_a_kernel_written_for_the_prompts_sizes_does_not_generalize(cache_dir: Path) -> None:
    v = run("cpp_overfit.py", cache_dir, hidden_shapes=True)
    assert v.status is Status.OK and v.generalizes is False, (v.message, v.hidden)
    assert "runtime_error" in v.hidden
    warning = next(w for w in v.warnings if "not at others" in w)
    assert "batch_size" not in warning  # the sizes stay out of what reaches the model


def test_a_pytorch_fallback_at_unseen_sizes_is_a_cheat(cache_dir: Path) -> None:
    v = run("cpp_fallback_unseen.py", cache_dir, hidden_shapes=True)
    assert v.status is Status.CHEAT and v.rule == "no-custom-kernel" and v.generalizes is False
    assert v.message.startswith("at sizes not shown in the prompt")
    assert "batch_size" not in v.message


def test_a_wrong_candidate_is_not_checked_again(cache_dir: Path) -> None:
    v = run("cpp_wrong.py", cache_dir, hidden_shapes=True)
    assert v.status is Status.MISMATCH and v.generalizes is None and v.hidden == ""
