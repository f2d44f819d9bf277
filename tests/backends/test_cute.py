"""The `cute` backend (NVIDIA's CuTe DSL), a plugin registered through the `kbench.backends` entry point
group: its kernels found in a source in every import spelling, the device symbols they run under, its
worker environment, its precision rule, its refusal of a CPU device, the static verdicts of its wrong
fixtures, and its compile check (sm_90a PTX without a GPU; the prompt examples' own are in
tests/prompts/test_prompt_examples.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from importlib import resources

import pytest

from kbench.backends import CompileCheck, backend_names, get_backend
from kbench.checks import kernel_names, run_checks
from kbench.errors import ConfigError

pytest.importorskip("cutlass", reason="the cute extra is not installed")

FIXTURES = resources.files("kbench.selftest") / "fixtures/gelu_tanh"
HONEST = (FIXTURES / "correct/honest.cute.py").read_text()


def _wrong(name: str) -> str:
    return (FIXTURES / f"wrong/{name}.cute.py").read_text()


def test_registered_through_its_entry_point() -> None:
    from importlib.metadata import entry_points

    assert [p.value for p in entry_points(group="kbench.backends") if p.name == "cute"] == [
        "kbench.backends.cute"
    ]
    assert "cute" in backend_names()
    backend = get_backend("cute")
    assert (backend.title, backend.gpu_kernels, backend.needs_gpu) == ("CuTe DSL", True, True)
    assert backend.version() is not None


def test_kernels_are_its_decorated_functions_in_every_spelling() -> None:
    source = """
import cutlass
import cutlass.cute as cute
from cutlass import cute as cu
from cutlass.cute import kernel, jit

@cute.kernel
def k_alias(x):
    pass

@cu.kernel
def k_from(x):
    pass

@cutlass.cute.kernel
def k_full(x):
    pass

@kernel
def k_bare(x):
    pass

@cute.jit(preprocess=True)
def host(x):
    k_alias(x).launch(grid=(1, 1, 1), block=(32, 1, 1))

@jit
def host_bare(x):
    pass

def helper(x):
    return x
"""
    assert kernel_names(source, "cute") == ("k_alias", "k_from", "k_full", "k_bare", "host", "host_bare")
    assert kernel_names(source, "triton") == ()


def test_kernel_symbols_match_the_ptx_entry_the_profiler_lists() -> None:
    from kbench.backends.profile import _matcher

    symbols = get_backend("cute").kernel_symbols(["gelu_tanh_kernel", "gelu_tanh"])
    assert symbols == ["kernel_cutlass_gelu_tanh_kernel", "kernel_cutlass_gelu_tanh"]
    pattern = _matcher(symbols)
    assert pattern is not None
    # the `.entry` cute.compile wrote for the honest fixture's kernel (sm_90a, 16 x 1024 fp32)
    entry = "kernel_cutlass_gelu_tanh_kernel_tensorptrf32generico163841_tensorptrf32generico163841__0"
    found = pattern.search(entry)
    assert found is not None and found.group(1) == "kernel_cutlass_gelu_tanh_kernel"
    assert pattern.search("void at::native::vectorized_elementwise_kernel<4, gelu_tanh>") is None


def test_its_worker_keeps_no_disk_cache_and_dumps_nothing() -> None:
    for device in ("cpu", "cuda"):
        env = get_backend("cute").job_env(device)
        assert env["CUTE_DSL_DISABLE_FILE_CACHING"] == "1" and env["CUTE_DSL_KEEP"] == ""
        assert "TRITON_INTERPRET" not in env


def test_a_cpu_device_is_refused_with_what_the_cpu_can_do() -> None:
    with pytest.raises(ConfigError, match="only on an NVIDIA GPU") as info:
        get_backend("cute").check_environment("cpu")
    assert "compile" in str(info.value)


def _findings(source: str) -> dict[str, str]:
    return {f.rule: f.message for f in run_checks(source, "cute", dtype="fp32").findings}


@pytest.mark.parametrize(
    "spelling",
    [
        "x = cutlass.Float16(1.0)",
        "x = cute.BFloat16",
        "from cutlass import TFloat32\nx = TFloat32",
        "x = cutlass.Float8E4M3FN",
        "op = cute.nvgpu.warpgroup.MmaF16BF16Op",
        "t = from_dlpack(a, force_tf32=True)",
    ],
)
def test_its_low_precision_spellings_warn_on_an_fp32_problem(spelling: str) -> None:
    source = HONEST + "\n" + spelling + "\n"
    assert "precision-downgrade" in _findings(source)
    assert run_checks(source, "cute", dtype="fp16").findings == run_checks(HONEST, "cute", "fp16").findings


def test_the_static_verdicts_of_its_fixtures() -> None:
    # `launch(..., stream=stream)` in the jit function is the current stream handed down from forward; the
    # shared streams rule cannot follow it there and warns (a warning, never a rejection)
    honest = {f.rule: f.severity.value for f in run_checks(HONEST, "cute", "fp32").findings}
    assert {r: s for r, s in honest.items() if s != "info"} == {"streams": "warn"}
    assert "try-fallback" in _findings(_wrong("try_fallback"))
    assert "cutlass.Float16" in _findings(_wrong("precision_downgrade"))["precision-downgrade"]
    assert (
        "pass --backend cute"
        in {f.rule: f.message for f in run_checks(HONEST, "triton").findings}["no-kernel"]
    )
    # the unused kernel is compiled but never called: only the GPU's profiler can tell (no-custom-kernel)
    assert kernel_names(_wrong("kernel_unused"), "cute") == ("gelu_tanh_kernel", "gelu_tanh")


BROKEN = HONEST.replace("cute.math.tanh(inner)", "cute.math.no_such_function(inner)")


@pytest.fixture(scope="module")
def checks() -> dict[str, CompileCheck]:
    """The honest fixture through one forward of its problem's small shapes, and a broken kernel: two
    clean processes at once (each imports cutlass, 4-10 s)."""
    backend = get_backend("cute")
    problem = str(FIXTURES / "problem.py")
    with ThreadPoolExecutor(2) as pool:
        honest = pool.submit(backend.compile_check, HONEST, "sm_90", problem, "small")  # type: ignore[call-arg]
        broken = pool.submit(backend.compile_check, BROKEN, "sm_90", problem, "small")  # type: ignore[call-arg]
        return {"honest": honest.result(), "broken": broken.result()}


@pytest.mark.xdist_group("cute-compile")
def test_the_honest_fixture_compiles_for_sm90a(checks: dict[str, CompileCheck]) -> None:
    check = checks["honest"]
    assert check.ok, check.log
    assert "compiled for sm_90a" in check.log and "launch skipped (no GPU)" in check.log
    assert [k for k in check.kernels if k.startswith("kernel_cutlass_gelu_tanh_kernel_")] == list(
        check.kernels
    )


@pytest.mark.xdist_group("cute-compile")
def test_a_kernel_the_dsl_rejects_fails_the_check(checks: dict[str, CompileCheck]) -> None:
    check = checks["broken"]
    assert not check.ok and check.kernels == ()
    assert "no_such_function" in check.log
