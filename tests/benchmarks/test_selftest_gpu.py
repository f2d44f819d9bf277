"""benchmarks/selftest_gpu.py: which jobs a GPU selftest call runs (no GPU needed to list them)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import selftest_gpu  # noqa: E402


def test_controls_only_drops_the_fixtures_and_keeps_every_control_in_backend_order():
    every = selftest_gpu.jobs(["triton", "cuda"])
    controls = selftest_gpu.jobs(["triton", "cuda"], fixtures=False)
    kinds = lambda js: [j.kind for j in js]  # noqa: E731
    assert "fixture" in kinds(every) and "fixture" not in kinds(controls)
    assert [j for j in every if j.kind != "fixture"] == controls
    solutions = [j.submission.backend for j in controls if j.kind == "solution"]
    assert solutions and solutions == sorted(solutions, key=["triton", "cuda"].index)
    assert {"triton", "cuda"} == set(solutions)


def test_a_fixture_is_submitted_as_the_selftest_judges_submit_it():
    from kbench.selftest.runner import fixture_text

    fixtures = [j for j in selftest_gpu.jobs([]) if j.kind == "fixture"]
    assert fixtures and all(j.fixture is not None and j.label == j.fixture.id for j in fixtures)
    for j in fixtures:
        assert j.fixture is not None
        assert j.submission.source == fixture_text(j.fixture.path)  # its `# include:` file too
        assert j.submission.backend == j.fixture.backend and j.submission.timeout_s == j.fixture.timeout_s


def test_a_solution_is_named_by_its_backend_for_skipping_and_by_its_file_in_the_table():
    solution = next(j for j in selftest_gpu.jobs(["triton"], fixtures=False) if j.kind == "solution")
    assert solution.name == f"triton/{solution.label}" and solution.label.endswith(".py")
