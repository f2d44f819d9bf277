"""The prompt examples are real: each solution matches its reference (cpp built and run, Triton under the
interpreter on CPU); CUDA solutions are parsed and their kernel source checked (run on a GPU when present).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import torch

from kbench.problems import build_model, load
from kbench.problems.inputs import flatten_outputs
from kbench.problems.sources import make_problem
from kbench.prompts.builder import EXAMPLES, TRAINING_EXAMPLES

STEMS = [stem for stem, _ in EXAMPLES + TRAINING_EXAMPLES]


def _text(*parts: str) -> str:
    node = resources.files("kbench.prompts") / "examples"
    for part in parts:
        node = node / part
    return node.read_text()


def _exec(source: str, name: str) -> types.ModuleType:
    import linecache

    module = types.ModuleType(name)
    sys.modules[name] = module
    # its text where `inspect.getsource` looks (Helion reads its kernels' source to compile them)
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    exec(compile(source, name, "exec"), module.__dict__)
    return module


def _check_against_reference(stem: str, backend: str, device: str = "cpu") -> None:
    problem = make_problem("examples", 0, STEMS.index(stem) + 1, stem, _text("reference", f"{stem}.py"), None)
    loaded = load(problem, "small")
    ref = build_model(loaded).to(device)
    solution = _exec(_text(backend, f"{stem}.py"), f"kbench_example_{backend}_{stem}")
    torch.manual_seed(42)
    init = loaded.get_init_inputs()
    torch.manual_seed(42)
    new = solution.ModelNew(*init).to(device)
    torch.manual_seed(0)
    inputs = [x.to(device) for x in loaded.get_inputs()]
    with torch.no_grad():  # a training example's step: its outputs, then its gradients
        expected, got = loaded.judged(ref)(*inputs), loaded.judged(new)(*inputs)
    expected, got = flatten_outputs(expected), flatten_outputs(got)
    assert len(got) == len(expected) == (3 if loaded.training else 1)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)


@pytest.fixture(scope="module")
def cpp_examples(session_cache: Path) -> dict[str, Any]:
    """Every cpp example's functions from one extension (tests/joinedbuild.py), built through kbench's
    build cache in the session's cache folder with the examples' own flags."""
    from joinedbuild import build_joined  # the tests' folder: not importable where this file is run alone

    return build_joined([_text("cpp", f"{stem}.py") for stem in STEMS], session_cache)


@pytest.mark.slow
@pytest.mark.xdist_group("prompt-examples-cpp")  # one worker: the module's one build serves them all
@pytest.mark.parametrize("stem", STEMS)
def test_cpp_example_matches_reference(
    stem: str, cpp_examples: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example as written, its load_inline call answered by its functions in the joined extension."""
    from joinedbuild import answer_load_inline

    answer_load_inline(monkeypatch, _text("cpp", f"{stem}.py"), cpp_examples)
    _check_against_reference(stem, "cpp")


_INTERPRETED_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from test_prompt_examples import STEMS, _check_against_reference
out = {}
for stem in STEMS:
    try:
        _check_against_reference(stem, sys.argv[2])
        out[stem] = "ok"
    except Exception as exc:
        out[stem] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""
INTERPRETED = ("helion", "triton")  # the backends whose examples run on the CPU in Triton's interpreter


@pytest.fixture(scope="module", params=INTERPRETED)
def interpreted_results(request: pytest.FixtureRequest) -> tuple[str, dict[str, str]]:
    """A backend's examples in one interpreter process: TRITON_INTERPRET must be set before triton is
    imported (its own library functions are compiled at import), and the import costs ~2 s."""
    backend = request.param
    pytest.importorskip(backend, reason=f"the {backend} extra is not installed")
    from kbench.backends import get_backend

    env = os.environ | get_backend(backend).job_env("cpu")  # a CPU worker's: the interpreter, and more
    proc = subprocess.run(
        [sys.executable, "-c", _INTERPRETED_SCRIPT, str(Path(__file__).parent), backend],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return backend, dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.xdist_group("prompt-examples-interpreted")  # one worker: one interpreter run per backend
@pytest.mark.parametrize("stem", STEMS)
def test_interpreted_example_matches_reference(
    stem: str, interpreted_results: tuple[str, dict[str, str]]
) -> None:
    backend, results = interpreted_results
    assert results[stem] == "ok", f"{backend}: {results[stem]}"


@pytest.mark.parametrize("stem", STEMS)
def test_cuda_example_source_is_well_formed(stem: str) -> None:
    from joinedbuild import inline_arguments  # the tests' folder: not importable where this file is run alone

    arguments = inline_arguments(_text("cuda", f"{stem}.py"))
    cuda, functions = arguments["cuda_sources"], arguments["functions"]
    assert "__global__ void" in cuda and "<<<" in cuda
    assert cuda.count("{") == cuda.count("}") and cuda.count("(") == cuda.count(")")
    for fn in functions:
        assert re.search(rf"(torch::Tensor|std::vector<torch::Tensor>) {fn}\(", cuda), f"{fn} is not defined"


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("stem", STEMS)
def test_cuda_example_matches_reference_on_gpu(stem: str) -> None:
    _check_against_reference(stem, "cuda", "cuda")


CUTE_STEMS = [stem for stem, _ in EXAMPLES]  # CuTe has no training example


@pytest.fixture(scope="module")
def cute_checks() -> dict[str, object]:
    """The CuTe examples compile-checked for sm_90a (the DSL runs nothing without a GPU): each through one
    forward of its reference's small shapes in a clean process, two at a time (each imports cutlass)."""
    pytest.importorskip("cutlass", reason="the cute extra is not installed")
    from concurrent.futures import ThreadPoolExecutor

    from kbench.backends.cutecheck import check_file

    root = resources.files("kbench.prompts") / "examples"
    with ThreadPoolExecutor(2) as pool:
        jobs = {
            s: pool.submit(
                check_file,
                str(root / "cute" / f"{s}.py"),
                "sm_90",
                str(root / "reference" / f"{s}.py"),
                "small",
            )  # fmt: skip
            for s in CUTE_STEMS
        }
        return {s: job.result() for s, job in jobs.items()}


@pytest.mark.slow
@pytest.mark.xdist_group("prompt-examples-cute")
@pytest.mark.parametrize("stem", CUTE_STEMS)
def test_cute_example_compiles_for_sm90a(stem: str, cute_checks: dict[str, object]) -> None:
    check = cute_checks[stem]
    assert check.ok, check.log  # type: ignore[attr-defined]
    assert "compiled for sm_90a" in check.log and check.kernels  # type: ignore[attr-defined]


TILELANG_CPU_STEMS = ["add", "gelu"]  # TileLang lowers them to C; its GEMM's tile ops run only on a GPU
_TILELANG_SCRIPT = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from kbench.backends import KernelRecorder, get_backend
get_backend("tilelang").install_hooks(KernelRecorder(), Path(sys.argv[2]))  # as a CPU worker builds them
import builtins, test_prompt_examples as t
from test_prompt_examples import TILELANG_CPU_STEMS, _check_against_reference
def compile_alone(source, name, mode):  # as a candidate's file is imported: no `from __future__` of the
    # test file inherited (TileLang evaluates string annotations itself and misses names only they use)
    return builtins.compile(source, name, mode, dont_inherit=True)
t.compile = compile_alone
out = {}
for stem in TILELANG_CPU_STEMS:
    try:
        _check_against_reference(stem, "tilelang")
        out[stem] = "ok"
    except Exception as exc:
        out[stem] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def tilelang_cpu_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The TileLang examples that run on the CPU, in one process with a CPU worker's environment and hooks
    (TileLang's C target, built without vectorization): importing TileLang costs ~3 s, each kernel ~2 s."""
    pytest.importorskip("tilelang", reason="the tilelang extra is not installed")
    from kbench.backends import get_backend

    home = tmp_path_factory.mktemp("tilelang-home")  # TileLang's kernel cache: this run's own
    env = os.environ | get_backend("tilelang").job_env("cpu") | {"HOME": str(home), "TMPDIR": str(home)}
    proc = subprocess.run(
        [sys.executable, "-c", _TILELANG_SCRIPT, str(Path(__file__).parent), str(home)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
@pytest.mark.xdist_group("prompt-examples-tilelang")
@pytest.mark.parametrize("stem", TILELANG_CPU_STEMS)
def test_tilelang_example_matches_reference_on_the_cpu(
    stem: str, tilelang_cpu_results: dict[str, str]
) -> None:
    assert tilelang_cpu_results[stem] == "ok", tilelang_cpu_results[stem]


@pytest.mark.slow
def test_tilelang_gemm_example_compiles_for_sm90a() -> None:
    """Its T.alloc_shared / T.alloc_fragment tiles do not lower to C: compiled for sm_90a (nvcc) through one
    forward of its reference's small shapes instead."""
    pytest.importorskip("tilelang", reason="the tilelang extra is not installed")
    from kbench.backends import get_backend

    root = resources.files("kbench.prompts") / "examples"
    check = get_backend("tilelang").compile_check(
        _text("tilelang", "gemm_leaky_relu.py"),
        "sm_90",
        problem=str(root / "reference" / "gemm_leaky_relu.py"),
    )
    assert check.ok and check.kernels, check.log
