"""The shipped solutions (level 2, and level 5's training steps), against their problem's `small` preset
(a training problem's step: outputs and every gradient): Triton and Helion ones run correctly under
TRITON_INTERPRET=1, TileLang ones through TileLang's C target, cpp ones on the CPU; CUDA ones define a
matching ModelNew and their kernel part compiles for sm_90 with nvcc (without torch headers); CuTe ones
compile for sm_90a (the DSL runs nothing on a CPU). GPU correctness and speed: benchmarks/solutions.py.

Solution files are read as text (ast) wherever possible: importing a CUDA solution would build it.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from kbench.problems.inputs import flatten_outputs
from kbench.problems.loader import load
from kbench.problems.sources import load_source
from kbench.types import Problem

SOLUTIONS = Path(__file__).resolve().parents[2] / "src" / "kbench" / "suite" / "solutions"
MIN_COUNTS = {"cuda": 100, "triton": 145, "cpp": 16, "helion": 10, "cute": 10, "tilelang": 11}
MIN_TRAINING = {"cpp": 10, "triton": 32}  # level 5's solutions, of the counts above


def _paths(backend: str) -> list[Path]:
    return sorted(
        (SOLUTIONS / backend).glob("level*/*.py"),
        key=lambda p: (int(p.parent.name.removeprefix("level")), int(p.name.split("_")[0])),
    )


def _key(path: Path) -> str:
    """A solution's problem: `LEVEL/ID_Name`."""
    return f"{path.parent.name.removeprefix('level')}/{path.stem}"


@pytest.fixture(scope="module")
def problems() -> dict[str, Problem]:
    return {f"{p.level}/{p.number}_{p.name}": p for p in load_source("kbench")}


def _import(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"kbench_test_solution_{path.parent.parent.name}_{path.parent.name}_{path.stem}", path
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import does: Helion finds a kernel's helpers through it
    spec.loader.exec_module(module)
    return module


def _check_against_reference(problem: Problem, model_new: type, seed: int = 3) -> None:
    """Same init seed -> same parameters; same input seed -> same inputs; outputs within tolerance."""
    loaded = load(problem, "small")
    torch.manual_seed(42)
    init = loaded.get_init_inputs()
    torch.manual_seed(42)
    ref_model = loaded.judged(loaded.Model(*init))  # a training problem's step: forward and backward
    torch.manual_seed(42)
    new_model = loaded.judged(model_new(*init))
    torch.manual_seed(seed)
    inputs = loaded.get_inputs()
    with torch.no_grad():
        expected = flatten_outputs(ref_model(*inputs))
        got = flatten_outputs(new_model(*inputs))
    tol = problem.tol("fp32")
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert isinstance(g, torch.Tensor) and g.shape == e.shape and g.dtype == e.dtype
        torch.testing.assert_close(g, e, atol=tol, rtol=tol)


def test_solution_counts_and_names(problems: dict[str, Problem]) -> None:
    for backend, minimum in MIN_COUNTS.items():
        paths = _paths(backend)
        assert len(paths) >= minimum, f"{backend}: {len(paths)} solutions"
        unknown = [_key(p) for p in paths if _key(p) not in problems]
        assert not unknown, f"{backend} solutions with no problem of the same level and ID_Name: {unknown}"
    for backend, minimum in MIN_TRAINING.items():
        trained = [p for p in _paths(backend) if problems[_key(p)].level == 5]
        assert len(trained) >= minimum, f"{backend}: {len(trained)} training solutions"


def _init_args(code: str, cls: str) -> list[str]:
    for node in ast.parse(code).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    return [a.arg for a in item.args.args[1:]]
    raise AssertionError(f"no {cls}.__init__")


@pytest.mark.parametrize("backend", sorted(MIN_COUNTS))
def test_model_new_signature_matches_problem(backend: str, problems: dict[str, Problem]) -> None:
    for path in _paths(backend):
        code = path.read_text()
        assert _init_args(code, "ModelNew") == _init_args(problems[_key(path)].code, "Model"), path.name
        assert "except" not in code, f"{path.name}: no fallback paths in a reference solution"


_TEMPLATE_KERNEL = re.compile(r"template\s*<([^>]*)>\s*__global__\s+void\s+(\w+)\s*\(([^)]*)\)", re.S)
_TEMPLATE_VALUES = {"int": ("1", "4"), "bool": ("false", "true")}


def _instantiations(kernels: str) -> str:
    """Explicit instantiations of every templated kernel (the torch wrapper that instantiates them is not
    compiled here), so nvcc type-checks their bodies for each vector width / flag the wrapper uses."""
    lines = []
    for tparams, name, params in _TEMPLATE_KERNEL.findall(kernels):
        kinds = [t.split()[0] for t in tparams.split(",")]
        for combo in itertools.product(*(_TEMPLATE_VALUES[k] for k in kinds)):
            lines.append(f"template __global__ void {name}<{', '.join(combo)}>({params});")
    return "\n".join(lines)


_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.M)


def _unit(kernels: dict[str, str]) -> str:
    """One CUDA unit of several solutions' kernels, each in a namespace of its own with its templated
    kernels instantiated, its macros undefined after it (the strings include nothing, so nothing of one
    reaches another but through the namespace, which keeps their names apart)."""
    parts = []
    for i, (name, code) in enumerate(kernels.items()):
        undefs = "".join(f"#undef {m}\n" for m in dict.fromkeys(_DEFINE.findall(code)))
        parts.append(
            f"// {name}\nnamespace kbench_solution_{i} {{\n{code}\n{_instantiations(code)}\n}}\n{undefs}"
        )
    return "\n".join(parts)


@pytest.mark.slow
def test_cuda_kernels_compile_for_sm90(tmp_path: Path) -> None:
    """Every CUDA_KERNELS string is plain CUDA (no torch headers) that nvcc compiles to sm_90 PTX, with each
    templated kernel instantiated. nvcc parses its runtime headers anew for every unit (~0.5 s of a core
    each), so the strings go to it in four units of 25; a unit that fails is compiled again one string at
    a time, so that the failure names its solution and what the compiler said of it alone."""
    from concurrent.futures import ThreadPoolExecutor

    from joinedbuild import string_constant  # the tests' folder: not importable where this file runs alone

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    kernels = {path.name: string_constant(path.read_text(), "CUDA_KERNELS") for path in _paths("cuda")}
    for name, code in kernels.items():
        assert "#include" not in code and "__global__" in code, name

    def compile_ptx(group: dict[str, str]) -> list[tuple[str, int, str]]:
        src = tmp_path / f"{hashlib.sha256(' '.join(group).encode()).hexdigest()[:16]}.cu"
        src.write_text(_unit(group) + "\n")
        cmd = [nvcc, "-arch=sm_90", "--ptx", "-std=c++17", "-o", str(src.with_suffix(".ptx")), str(src)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if run.returncode == 0 or len(group) == 1:
            return [(" ".join(group), run.returncode, run.stderr[-2000:])]
        return [r for name in group for r in compile_ptx({name: group[name]})]

    names = list(kernels)
    groups = [{n: kernels[n] for n in names[i : i + 25]} for i in range(0, len(names), 25)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for results in pool.map(compile_ptx, groups):
            for name, code, err in results:
                assert code == 0, f"{name}:\n{err}"


def _check_interpreted_all(backend: str) -> dict[str, str]:
    """Run in a fresh interpreter: TRITON_INTERPRET must be set before triton is first imported (triton's
    own @jit helpers such as tl.sigmoid are bound to the compiler or the interpreter at import)."""
    problems = {f"{p.level}/{p.number}_{p.name}": p for p in load_source("kbench")}
    results = {}
    for path in _paths(backend):
        try:
            _check_against_reference(problems[_key(path)], _import(path).ModelNew)
            results[_key(path)] = "ok"
        except Exception as exc:  # reported per solution by the parent test
            results[_key(path)] = f"{type(exc).__name__}: {exc}"[:3000]
    return results


def _interpreted_results(backend: str) -> dict[str, str]:
    from kbench.backends import get_backend

    pytest.importorskip(backend, reason=f"the {backend} extra is not installed")
    env = {**os.environ, **get_backend(backend).job_env("cpu")}  # a CPU worker's: the interpreter, and more
    run = subprocess.run(
        [sys.executable, __file__, "--check-interpreted", backend],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def triton_results() -> dict[str, str]:
    return _interpreted_results("triton")


@pytest.fixture(scope="module")
def helion_results() -> dict[str, str]:
    return _interpreted_results("helion")


@pytest.mark.slow
@pytest.mark.xdist_group("triton-solutions")  # one worker: the module's one interpreter run serves them all
@pytest.mark.parametrize("path", _paths("triton"), ids=lambda p: p.stem)
def test_triton_solution_matches_reference(path: Path, triton_results: dict[str, str]) -> None:
    assert triton_results.get(_key(path)) == "ok", triton_results.get(_key(path))


@pytest.fixture(scope="module")
def tilelang_results() -> dict[str, str]:
    return _interpreted_results("tilelang")  # TileLang's C target on the CPU (its worker's environment)


@pytest.mark.slow
@pytest.mark.xdist_group("tilelang-solutions")  # one worker: the module's one run serves them all
@pytest.mark.parametrize("path", _paths("tilelang"), ids=lambda p: p.stem)
def test_tilelang_solution_matches_reference(path: Path, tilelang_results: dict[str, str]) -> None:
    assert tilelang_results.get(_key(path)) == "ok", tilelang_results.get(_key(path))


@pytest.mark.slow
@pytest.mark.xdist_group("helion-solutions")  # one worker: the module's one interpreter run serves them all
@pytest.mark.parametrize("path", _paths("helion"), ids=lambda p: p.stem)
def test_helion_solution_matches_reference(path: Path, helion_results: dict[str, str]) -> None:
    assert helion_results.get(_key(path)) == "ok", helion_results.get(_key(path))


@pytest.fixture(scope="module")
def cute_results() -> dict[str, str]:
    """Each CuTe solution compiled for sm_90a at its problem's small preset, without a GPU (the DSL runs
    nothing on the CPU: backends/cutecheck.py runs one forward whose launches are skipped); two children
    at a time, each importing cutlass (3-11 s)."""
    from concurrent.futures import ThreadPoolExecutor

    from kbench.backends import get_backend

    pytest.importorskip("cutlass", reason="the cute extra is not installed")
    backend = get_backend("cute")
    problem_files = {f"{p.level}/{p.number}_{p.name}": p.path for p in load_source("kbench")}

    def check(path: Path) -> tuple[str, str]:
        res = backend.compile_check(path.read_text(), "sm_90", problem_files[_key(path)], "small")
        return _key(path), "ok" if res.ok and res.kernels else f"kernels {res.kernels}:\n{res.log}"

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(check, _paths("cute")))


@pytest.mark.slow
@pytest.mark.xdist_group("cute-solutions")  # one worker: the module's compile run serves them all
@pytest.mark.parametrize("path", _paths("cute"), ids=lambda p: p.stem)
def test_cute_solution_compiles_for_sm90(path: Path, cute_results: dict[str, str]) -> None:
    assert cute_results.get(_key(path)) == "ok", cute_results.get(_key(path))


@pytest.fixture(scope="module")
def cpp_solutions(session_cache: Path) -> dict[str, Any]:
    """Every cpp solution's functions from one extension (tests/joinedbuild.py), built in the session's
    cache folder (conftest.session_cache) with the solutions' own flags; and the recipe it got."""
    from joinedbuild import build_joined

    return build_joined([path.read_text() for path in _paths("cpp")], session_cache)


@pytest.mark.slow
@pytest.mark.xdist_group("cpp-solutions")  # one worker: the module's one build serves them all
@pytest.mark.parametrize("path", _paths("cpp"), ids=lambda p: p.stem)
def test_cpp_solution_matches_reference(
    path: Path, problems: dict[str, Problem], cpp_solutions: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The solution's module as written, its load_inline call answered by its functions in the joined
    extension."""
    from joinedbuild import answer_load_inline

    answer_load_inline(monkeypatch, path.read_text(), cpp_solutions)
    _check_against_reference(problems[_key(path)], _import(path).ModelNew)


@pytest.mark.slow
@pytest.mark.xdist_group("cpp-solutions")
def test_the_joined_cpp_solutions_were_built_with_the_lite_header(cpp_solutions: dict[str, Any]) -> None:
    assert cpp_solutions["recipe"] in {"lite-header", "lite-header+pch", "cache"}, cpp_solutions["recipe"]


def test_each_cpp_solution_is_built_with_the_lite_header(tmp_path: Path) -> None:
    """kbench builds each cpp solution against its lite torch/extension.h (its sources define functions and
    name nothing of torch's frontend; backends/fastbuild.py): one that stopped qualifying would build
    about twice as slowly in every evaluation."""
    from joinedbuild import inline_arguments

    from kbench.backends.fastbuild import lite_header_shim

    for path in _paths("cpp"):
        assert lite_header_shim(tmp_path, inline_arguments(path.read_text())) is not None, path.name


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check-interpreted"]:
        print(json.dumps(_check_interpreted_all(sys.argv[2])))
