"""Triton compile check: kernels run by the interpreter compile for sm_90 in a clean process.

Under TRITON_INTERPRET=1 Triton's own jit helpers (tl.sigmoid, ...) are interpreted and leave
triton.language patched (Triton 3.7), so an in-process compile failed on honest kernels. Each case is
a full CPU evaluation without timing (~10-20 s: reference, dry run, compile).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from evalfixtures import cpu_config

from kbench.backends.tritoncheck import _decode, _encode
from kbench.evaluate.flow import evaluate
from kbench.problems import get_problem
from kbench.solutions import shipped_candidate
from kbench.types import Status


@pytest.mark.slow
@pytest.mark.parametrize("number", [1, 23, 25])  # GEMM epilogue, elementwise (tl.sigmoid), row norm
def test_triton_solutions_compile_for_sm90(tmp_path: Path, number: int) -> None:
    problem = get_problem(f"kbench:2/{number}")
    candidate = shipped_candidate(problem, "triton")
    assert candidate is not None
    v = evaluate(problem, candidate, cpu_config(tmp_path, backend="triton", measure=False))
    assert v.status is Status.OK, v.message + v.log_tail
    assert v.build is not None and "compiled for sm_90" in v.build.log, v.build


def test_constexpr_values_round_trip() -> None:
    import triton.language as tl

    for value in (1024, 0.5, True, None, "ieee"):
        assert _decode(_encode(value)) == value
    assert _decode(_encode(tl.float16)) == tl.float16
    with pytest.raises(TypeError, match="cannot be replayed"):
        _encode(object())
