"""The `tilelang` backend, a plugin registered through the `kbench.backends` entry point group: its kernels
found in a source in every import spelling, the CUDA symbols they run under, its worker environment, its
precision rule, whole CPU evaluations (TileLang's C target; the honest fixture ends `ok`, the one that leaves
its kernel unused is caught) and its compile check (an sm_90a GEMM compiled with nvcc, no GPU)."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import pytest

from kbench.backends import backend_names, get_backend
from kbench.checks import kernel_names, run_checks

pytest.importorskip("tilelang", reason="the tilelang extra is not installed (pip install 'kbench[tilelang]')")

FIXTURES = resources.files("kbench.selftest") / "fixtures/gelu_tanh"
HONEST = (FIXTURES / "correct/honest.tilelang.py").read_text()
EXAMPLES = resources.files("kbench.prompts") / "examples"


def test_registered_through_its_entry_point() -> None:
    from importlib.metadata import entry_points

    assert [p.value for p in entry_points(group="kbench.backends") if p.name == "tilelang"] == [
        "kbench.backends.tilelang"
    ]
    assert "tilelang" in backend_names()
    backend = get_backend("tilelang")
    assert (backend.title, backend.gpu_kernels, backend.needs_gpu) == ("TileLang", True, False)
    assert backend.version() is not None


def test_kernels_are_its_decorated_functions_in_every_spelling() -> None:
    source = """
import tilelang
import tilelang.language as T
from tilelang import language as L
from tilelang.language import prim_func
from tilelang import jit
import triton

@T.prim_func
def a(x: T.Tensor((4,), "float32")):
    pass

@L.prim_func
def b(x):
    pass

@prim_func
def c(x):
    pass

@tilelang.language.prim_func
def d(x):
    pass

@tilelang.jit(out_idx=[1])
def factory(n):
    @T.prim_func
    def inner(x):
        pass
    return inner

@jit
def bare_factory(n):
    pass

@triton.jit
def plain(x_ptr):
    pass

def helper(n):
    return tilelang.compile(a, out_idx=[1])
"""
    assert kernel_names(source, "tilelang") == ("a", "b", "c", "d", "factory", "inner", "bare_factory")
    assert kernel_names(source, "triton") == ("plain",)
    assert get_backend("tilelang").kernel_symbols(["gelu", "main"]) == ["gelu_kernel", "main_kernel"]


def test_its_worker_names_the_target_and_no_compile_chatter() -> None:
    backend = get_backend("tilelang")
    cpu, gpu = backend.job_env("cpu"), backend.job_env("cuda:0")
    assert cpu["TILELANG_DEFAULT_TARGET"] == "c" and gpu["TILELANG_DEFAULT_TARGET"] == "cuda"
    assert cpu["TILELANG_PRINT_ON_COMPILATION"] == gpu["TILELANG_PRINT_ON_COMPILATION"] == "0"


_FMA_LOOP = """                for i, j in T.Parallel(block_m, block_n):
                    for kk in T.serial(block_k):
                        acc[i, j] += T.cast(x_s[i, kk], "float32") * T.cast(w_s[j, kk], "float32")
"""


def _tensor_core_gemm(example: str) -> str:
    """The GEMM example with its fp32 multiply-add loop replaced by T.gemm (tensor cores: TF32 on fp32)."""
    assert _FMA_LOOP in example
    return example.replace(_FMA_LOOP, "                T.gemm(x_s, w_s, acc, transpose_B=True)\n")


def _findings(source: str, backend: str = "tilelang") -> dict[str, str]:
    report = run_checks(source, backend, dtype="fp32")
    return {f.rule: f.message for f in report.findings}


def test_static_rules_know_its_kernels_and_low_precision_spellings() -> None:
    assert "pass --backend tilelang" in _findings(HONEST, "triton")["no-kernel"]
    assert "precision-downgrade" not in _findings(HONEST)
    assert "try-fallback" not in _findings(HONEST)  # T.tanh is the kernel's, not PyTorch's
    downgrade = (FIXTURES / "wrong/precision_downgrade.tilelang.py").read_text()
    assert "'float16'" in _findings(downgrade)["precision-downgrade"]
    attr = HONEST.replace("v = x[row, col]", "v = T.cast(x[row, col], T.bfloat16)")
    assert "tilelang.language.bfloat16" in _findings(attr)["precision-downgrade"]
    gemm = (EXAMPLES / "tilelang/gemm_leaky_relu.py").read_text()
    assert "precision-downgrade" not in _findings(gemm)  # fp32 FMAs, no T.gemm
    assert "TF32" in _findings(_tensor_core_gemm(gemm))["precision-downgrade"]


@pytest.mark.slow
def test_fixtures_evaluate_on_the_cpu_through_tilelangs_c_target(tmp_path: Path) -> None:
    """One evaluator for both (they share the reference run); each runner compiles its kernel (~3 s)."""
    from evalfixtures import cpu_config

    from kbench.selftest.runner import Judges, discover

    wanted = ("correct/honest.tilelang", "wrong/kernel_unused.tilelang")
    fixtures = [f for f in discover(backends=["tilelang"]) if f.id.endswith(wanted)]
    assert len(fixtures) == 2
    with Judges(base=cpu_config(tmp_path)) as judges:
        outcomes = judges.judge(fixtures)
    for outcome in outcomes:
        assert outcome.passed, (outcome.fixture.id, outcome.got, outcome.message)


@pytest.mark.slow
def test_a_tensor_core_gemm_compiles_for_sm90a_without_a_gpu() -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    problem = Path(str(EXAMPLES / "reference/gemm_leaky_relu.py"))
    gemm = (EXAMPLES / "tilelang/gemm_leaky_relu.py").read_text()
    # T.gemm here (its fp32 multiply-add form is the prompt example's own check): the tile op that lowers
    # to wgmma/mma on sm_90a and not to the CPU's C
    check = get_backend("tilelang").compile_check(_tensor_core_gemm(gemm), "sm_90", problem=problem)
    assert check.ok and check.kernels == ("gemm_bias_leaky_kernel_kernel",), check.log
    broken = gemm.replace("T.cast(w_s[j, kk], ", "T.cast(w_s[kk], ")  # a 2-D tile indexed with one index
    failed = get_backend("tilelang").compile_check(broken, "sm_90", problem=problem)
    assert not failed.ok and failed.log and not failed.kernels
