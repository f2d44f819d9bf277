"""The CI gate: every embedded problem runs on CPU with its small preset and passes verify --strict."""

import pytest

from kbench.problems import select
from kbench.verify import verify_problem

PROBLEMS = select("kbench")


@pytest.mark.parametrize("problem", PROBLEMS, ids=[p.key for p in PROBLEMS])
def test_problem_passes_strict_verify(problem) -> None:  # type: ignore[no-untyped-def]
    result = verify_problem(problem, "small", "cpu")
    assert result.passed(strict=True), "; ".join(f"{f.rule}: {f.message}" for f in result.findings)
