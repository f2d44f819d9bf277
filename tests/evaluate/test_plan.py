"""What a job's worker asks its warm starter to preload for the workers like it (evaluate/plan.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from evalfixtures import cpu_config

from kbench.evaluate.plan import job_spec, make_plan, worker_preloads
from kbench.problems import get_problem


@pytest.mark.parametrize(
    ("role", "backend", "baselines", "measure", "expected"),
    [
        ("candidate", "cpp", [], True, ["torch.utils.cpp_extension"]),
        ("candidate", "triton", [], True, ["torch.utils.cpp_extension", "triton.testing"]),
        ("build", "cuda", [], True, ["torch.utils.cpp_extension"]),
        ("reference", "", ["eager"], True, []),  # no compile baseline: torch._dynamo is never imported
        ("reference", "", ["eager", "compile"], True, ["torch._dynamo"]),
        ("reference", "", ["eager", "compile-max-autotune"], True, ["torch._dynamo"]),
        ("reference", "", ["eager", "compile"], False, []),  # outputs only: nothing is timed
    ],
)
def test_a_worker_names_what_it_imports(
    tmp_path: Path, role: str, backend: str, baselines: list[str], measure: bool, expected: list[str]
) -> None:
    cfg = cpu_config(tmp_path, backend=backend or "cpp", baselines=baselines)
    kw: dict[str, object] = {"backend": backend} if backend else {}
    spec = job_spec(get_problem("kbench:2/1"), cfg, make_plan(cfg, "cpu"), role=role, baselines=baselines,
                    measure=measure, **kw)  # fmt: skip
    assert worker_preloads(spec) == expected
