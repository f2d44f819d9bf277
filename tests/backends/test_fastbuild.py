"""Fast build recipes: what they change in load_inline's arguments, the fallback, the PCH store."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kbench.backends import KernelRecorder, fastbuild, pch
from kbench.referee.builds import recipes as _recipes

CUDA = "#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>\n__global__ void k() {}\n"


def _build(load: Any, arguments: dict[str, Any], root: Path, key: str, recorder: KernelRecorder) -> str:
    """The referee's build (referee/builds.py) with `load` in this process instead of a confined builder,
    recorded as a runner records it."""
    from kbench.backends.jitbuild import run
    from kbench.referee.builds import build

    answer = build(arguments, key, root, lambda request: run(request, load))
    recorder.extra["build_recipe"] = answer.recipe
    if answer.errors:
        recorder.extra["fast_recipe_errors"] = dict(answer.errors)
    if answer.pch_seconds is not None:
        recorder.extra["pch_seconds"] = round(answer.pch_seconds, 1)
    if not answer.ok:
        raise RuntimeError(answer.log)
    return "module"


def test_light_headers_drop_only_the_full_header() -> None:
    args = {"name": "m", "cuda_sources": CUDA, "cpp_sources": "#include <torch/extension.h>\nint f();"}
    light = fastbuild.light_cuda_sources(args)
    assert light is not None
    (source,) = light["cuda_sources"]
    assert "torch/extension.h" not in source and source.startswith("#include <torch/types.h>\n")
    assert "ATen/cuda/CUDAContext.h" in source and "__global__ void k() {}" in source
    assert light["cpp_sources"] == args["cpp_sources"]  # the bindings file keeps its header (PCH applies)
    assert args["cuda_sources"] == CUDA  # the caller's arguments are not modified
    assert fastbuild.light_cuda_sources({"cuda_sources": ["__global__ void k() {}"]}) is None
    assert fastbuild.light_cuda_sources({"cpp_sources": "#include <torch/extension.h>"}) is None


def _fake_builder(needs_full_header: bool, seen: list[dict[str, Any]]) -> Any:
    def load_inline(**arguments: Any) -> str:
        seen.append(arguments)
        sources = arguments.get("cuda_sources") or []
        if needs_full_header and not any("torch/extension.h" in s for s in sources):
            raise RuntimeError("Error building extension 'm': 'torch::nn' has not been declared")
        Path(arguments["build_directory"], "m.so").write_text("binary")
        return "module"

    return load_inline


def test_fast_recipes_first_then_the_candidates_own_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(fastbuild.RECIPE_ENV, "fast")
    monkeypatch.setenv(pch.PCH_ENV, "off")
    seen: list[dict[str, Any]] = []
    recorder = KernelRecorder()
    assert _build(_fake_builder(False, seen), {"name": "m", "cuda_sources": [CUDA]}, tmp_path, "a", recorder)
    assert len(seen) == 1 and recorder.extra["build_recipe"] == "op-headers+light-headers"
    shim = Path(seen[0]["extra_include_paths"][0], "torch", "types.h")
    assert shim.is_file() and "#include_next <torch/types.h>" in shim.read_text()

    seen.clear()
    recorder = KernelRecorder()
    args = {"name": "m", "cuda_sources": [CUDA]}
    assert _build(_fake_builder(True, seen), args, tmp_path, "b", recorder) == "module"
    assert len(seen) == 3 and seen[2]["cuda_sources"] == [CUDA]  # redone exactly as asked
    assert "extra_include_paths" not in seen[1]  # the light headers alone, without the shim
    assert recorder.extra["build_recipe"] == "standard (fast recipe failed)"
    errors = recorder.extra["fast_recipe_errors"]
    assert (
        set(errors) == {"op-headers+light-headers", "light-headers"}
        and "torch::nn" in errors["light-headers"]
    )
    assert (tmp_path / "b" / "m.so").exists() and list((tmp_path / ".staging").iterdir()) == []

    monkeypatch.setenv(fastbuild.OPS_ENV, "0")
    seen.clear()
    recorder = KernelRecorder()
    assert _build(_fake_builder(False, seen), {"name": "m", "cuda_sources": [CUDA]}, tmp_path, "c", recorder)
    assert recorder.extra["build_recipe"] == "light-headers"


def test_only_sources_that_declare_get_lean_bindings() -> None:
    decl = "#include <vector>\n// the kernels are in the CUDA file\ntorch::Tensor f(torch::Tensor x, double s);\n"
    assert fastbuild.declarations_only({"cpp_sources": decl})
    assert fastbuild.declarations_only(
        {"cpp_sources": ["std::vector<at::Tensor> g(const at::Tensor& x);", decl]}
    )
    assert fastbuild.declarations_only({"cpp_sources": "/* { = } */ torch::Tensor f(torch::Tensor x);"})
    for source in (
        "torch::Tensor f(torch::Tensor x) { return x; }",  # a body: it may call what the shim lacks
        "torch::Tensor f(torch::Tensor x, double s = 1.0);",  # a default value
        "#define F(n) torch::Tensor n(torch::Tensor x) { return x; }\nF(f)",  # a body behind a macro
        "torch::Tensor f(torch::nn::Module m);",  # the frontend
        "py::object f(py::object o);",  # pybind11 by name
        "// nothing but a comment",
        "",
    ):
        assert not fastbuild.declarations_only({"cpp_sources": source}), source
    assert not fastbuild.declarations_only({"cuda_sources": [CUDA]})  # no C++ sources: nothing to bind


def test_lean_bindings_come_first_and_only_while_no_pch_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(fastbuild.RECIPE_ENV, "fast")
    args = {"name": "m", "cpp_sources": "torch::Tensor f(torch::Tensor x);", "cuda_sources": [CUDA]}
    folder = tmp_path / "pch"
    labels = [label for label, _ in _recipes(args, folder, tmp_path)]
    assert labels == [
        "op-headers+light-headers+lean-bindings",
        "op-headers+light-headers",
        "light-headers",
        "standard (fast recipe failed)",
    ]
    lean = _recipes(args, folder, tmp_path)[0][1]
    first, second = (Path(p) for p in lean["extra_include_paths"][:2])
    assert "#include_next <torch/extension.h>" in (first / "torch" / "extension.h").read_text()
    assert (second / "torch" / "types.h").is_file()  # the operator headers' shim still applies
    defined = dict(args, cpp_sources="torch::Tensor f(torch::Tensor x) { return x; }")
    assert [label for label, _ in _recipes(defined, folder, tmp_path)][:2] == [
        "op-headers+light-headers+lite-header",  # a body: the lite header, never the lean one
        "op-headers+light-headers",
    ]
    _adopt_pch(tmp_path / "made", folder)  # with a PCH the bindings compile faster through it
    labels = [label for label, _ in _recipes(args, folder, tmp_path)]
    assert labels == ["op-headers+light-headers+pch", "light-headers+pch", "standard (fast recipe failed)"]


def test_the_lite_header_comes_first_for_defined_functions_and_then_precompiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(fastbuild.RECIPE_ENV, "fast")
    body = "#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { return x.relu(); }"
    args = {"name": "m", "cpp_sources": body, "extra_cflags": ["-O3"]}
    lite = fastbuild.lite_header_shim(tmp_path, args)
    assert lite is not None
    header, tool = lite / "torch" / "extension.h", {"g++": "13"}
    real, lite_pch = pch.pch_dir(tmp_path, args, tool), pch.pch_dir(tmp_path, args, tool, header)
    assert real != lite_pch and real.parent == lite_pch.parent == tmp_path / ".pch"
    assert [label for label, _ in _recipes(args, real, tmp_path, lite_pch)] == [
        "lite-header",
        "standard (fast recipe failed)",
    ]
    first = _recipes(args, real, tmp_path, lite_pch)[0][1]
    assert first["extra_include_paths"] == [str(lite)]
    shim = (lite / "torch" / "extension.h").read_text()
    assert "#include <torch/types.h>" in shim and "#include <torch/csrc/utils/pybind.h>" in shim
    assert "#include_next <torch/extension.h>" in shim  # nvcc's passes see the real header
    _adopt_pch(tmp_path / "made-real", real)  # torch's own header precompiled: the second attempt
    assert [label for label, _ in _recipes(args, real, tmp_path, lite_pch)] == [
        "lite-header",
        "pch",
        "standard (fast recipe failed)",
    ]
    (tmp_path / "made-lite" / "torch").mkdir(parents=True)
    (tmp_path / "made-lite" / pch.PCH_FILE).write_text("pch")
    assert pch.adopt(tmp_path / "made-lite", lite_pch, header) and pch.ready(lite_pch, header)
    assert not pch.ready(lite_pch) and pch.sound(lite_pch) and pch.sound(real)  # each its own header
    linked = (
        tmp_path.parent / f"{tmp_path.name}-link"
    )  # a cache reached through a link (evalfixtures.use_builds)
    linked.symlink_to(tmp_path, target_is_directory=True)
    assert pch.sound(linked / ".pch" / lite_pch.name)
    attempts = _recipes(args, real, tmp_path, lite_pch)
    assert [label for label, _ in attempts][0] == "lite-header+pch"
    assert attempts[0][1]["extra_include_paths"] == [str(lite_pch)]
    for source in (
        "torch::Tensor f(torch::Tensor x);",  # declarations only: the lean bindings instead
        "torch::Tensor f(torch::Tensor x) { return torch::nn::functional::relu(x); }",  # the frontend
        "#include <torch/torch.h>\ntorch::Tensor f(torch::Tensor x) { return x; }",
        "int64_t n() { return torch::cuda::device_count(); }",  # a frontend namespace types.h lacks
        "py::object f(py::object o) { return o; }",  # pybind11 by name
        "// nothing but a comment",
    ):
        assert fastbuild.lite_header_shim(tmp_path, {"cpp_sources": source}) is None, source


def test_the_lean_bindings_header_reaches_every_pybind11_caster_the_real_one_does(tmp_path: Path) -> None:
    """What makes the lean bindings bind the same: every pybind11 header, caster specialisation, opaque
    type and holder declaration the real torch/extension.h reaches, the lean one reaches too (checked
    against the installed torch, so an upgrade that moves one fails here, not in a verdict)."""
    if shutil.which("c++") is None:
        pytest.skip("needs a C++ compiler")
    import sysconfig

    from torch.utils.cpp_extension import include_paths

    flags = ["-std=c++17", "-DTORCH_API_INCLUDE_EXTENSION_H", "-D_GLIBCXX_USE_CXX11_ABI=1"]
    flags += [f"-isystem{p}" for p in [*include_paths(), sysconfig.get_paths()["include"]]]
    shim = fastbuild.bindings_shim(tmp_path, {"cpp_sources": "torch::Tensor f(torch::Tensor x);"})
    assert shim is not None

    def reached(*first: str) -> set[str]:
        main = tmp_path / "main.cpp"
        main.write_text("#include <torch/extension.h>\n")
        run = subprocess.run(
            ["c++", *first, *flags, "-E", "-H", str(main), "-o", os.devnull], capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr[-2000:]
        return {ln.lstrip(". ").strip() for ln in run.stderr.splitlines() if ln.startswith(".")}

    real, lean = reached(), reached(f"-I{shim}")
    assert len(lean) < len(real) / 2  # it is lean

    def pybind11(headers: set[str]) -> set[str]:
        return {h.split("/pybind11/", 1)[1] for h in headers if "/pybind11/" in h}

    assert pybind11(real) <= pybind11(lean)
    binds = ("type_caster<", "PYBIND11_MAKE_OPAQUE", "PYBIND11_DECLARE_HOLDER_TYPE", "polymorphic_type_hook")
    only_real = [h for h in real - lean if "/pybind11/" not in h]
    assert only_real and not [
        h for h in only_real if any(b in Path(h).read_text(errors="replace") for b in binds)
    ]


def test_a_real_extension_built_with_lean_bindings_binds_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """g++, ninja and torch's headers: the bindings compile against the lean header, the module binds
    and converts its arguments as with the real one (a tensor in and out, a wrong type refused)."""
    if shutil.which("c++") is None or shutil.which("ninja") is None:
        pytest.skip("needs a C++ compiler and ninja")
    import torch
    from torch.utils.cpp_extension import include_paths, load_inline

    from kbench.backends.buildcache import install

    definition = tmp_path / "twice.cpp"
    definition.write_text(
        "#include <ATen/core/Tensor.h>\nat::Tensor twice(at::Tensor x, double s) { return x.mul(2 * s); }\n"
    )
    obj = tmp_path / "twice.o"
    includes = [f"-I{p}" for p in include_paths()]
    subprocess.run(
        [
            "c++",
            "-std=c++17",
            "-fPIC",
            "-D_GLIBCXX_USE_CXX11_ABI=1",
            *includes,
            "-c",
            str(definition),
            "-o",
            str(obj),
        ],
        check=True,
    )
    monkeypatch.setenv(fastbuild.RECIPE_ENV, "fast")
    monkeypatch.setenv(pch.PCH_ENV, "use")
    import torch.utils.cpp_extension as ext

    recorder = KernelRecorder()
    monkeypatch.setattr(ext, "load_inline", load_inline)
    install(recorder, tmp_path / "builds", _builds_here(tmp_path / "builds"))
    module = ext.load_inline(
        name="lean_bindings_twice",
        cpp_sources="// defined in twice.o\ntorch::Tensor twice(torch::Tensor x, double s);\n",
        functions=["twice"],
        extra_ldflags=[str(obj)],
    )
    assert recorder.extra["build_recipe"] == "lean-bindings"
    assert torch.equal(module.twice(torch.ones(3), 1.5), torch.full((3,), 3.0))
    with pytest.raises(TypeError, match="incompatible function arguments"):
        module.twice("not a tensor", 1.0)


def test_op_header_shim_names_the_operators_the_sources_use(tmp_path: Path) -> None:
    src = (
        "#include <torch/types.h>\ntorch::Tensor f(torch::Tensor x) {\n"
        "  auto y = torch::empty_like(x); auto z = at::zeros({4}, x.options());\n"
        "  return x.contiguous(); }\n__global__ void softmax_kernel(float* p) { p[0] = expf(p[0]); }\n"
    )
    folder = fastbuild.op_header_shim(tmp_path, {"cuda_sources": [src]})
    assert folder is not None
    text = (folder / "torch" / "types.h").read_text()
    ops = {line.split("/")[-1][:-3] for line in text.splitlines() if line.startswith("#include <ATen/ops/")}
    # every identifier that names an ATen operator, and only those: all overloads of each come with it
    assert {"empty_like", "zeros", "contiguous"} <= ops and "softmax_kernel" not in ops and "expf" not in ops
    assert "using namespace at;" in text and "constexpr auto kFloat32 = at::kFloat;" in text
    assert text.index("#if defined(__CUDACC__)") < text.index("#include <ATen/core/Tensor.h>")
    assert fastbuild.op_header_shim(tmp_path, {"cuda_sources": [src]}) == folder  # one folder per content
    # autograd or the frontend: torch:: factories differ from at::'s there, so no shim
    assert (
        fastbuild.op_header_shim(
            tmp_path, {"cuda_sources": [src + "auto o = x.options().requires_grad(true);"]}
        )
        is None
    )
    assert fastbuild.op_header_shim(tmp_path, {"cuda_sources": ["torch::nn::Linear l(1, 2);"]}) is None
    assert fastbuild.op_header_shim(tmp_path, {"cpp_sources": [src]}) is None


def test_lean_shim_shadows_each_named_operator_header_for_nvcc_only(tmp_path: Path) -> None:
    src = (
        "#include <torch/types.h>\n#include <ATen/cuda/CUDAContext.h>\n"
        "torch::Tensor f(torch::Tensor x) { auto s = at::cuda::getCurrentCUDAStream();\n"
        "  return torch::cat({x, torch::relu(x)}, 0); }\n"
    )
    folder = fastbuild.op_header_shim(tmp_path, {"cuda_sources": [src]})
    assert folder is not None
    cat = (folder / "ATen" / "ops" / "cat.h").read_text()
    real = (fastbuild._ops_folder() / "cat.h").read_text()  # type: ignore[operator]
    nvcc, other = cat.split("#else\n#include_next")
    assert "#if defined(__CUDACC__)" in nvcc and other.startswith(" <ATen/ops/cat.h>")
    # the prelude its functions never use is gone; what they use stays, their bodies word for word
    assert "ATen/Context.h" in real and "ATen/Context.h" not in nvcc and "ATen/DeviceGuard.h" not in nvcc
    assert "#include <ATen/ops/cat_ops.h>" in nvcc and "#include <ATen/core/IListRef.h>" in nvcc
    body = [line for line in real.splitlines() if line.strip() and "#include" not in line]
    assert all(line in nvcc for line in body)
    assert "IListRef.h" not in (folder / "ATen" / "ops" / "relu.h").read_text()
    # only the stream is named: CUDAContext.h becomes the stream, device and error-check headers
    context = (folder / "ATen" / "cuda" / "CUDAContext.h").read_text()
    assert "#include <c10/cuda/CUDAStream.h>" in context.split("#else\n#include_next")[0]
    assert "#include_next <ATen/cuda/CUDAContext.h>" in context
    # tensor operators (`x + y`) come from a TensorOperators.h that names empty_like, not all of ATen
    types = (folder / "torch" / "types.h").read_text()
    assert "#include <ATen/TensorOperators.h>" in types and "#include <ATen/ops/empty_like.h>" in types
    operators = (folder / "ATen" / "TensorOperators.h").read_text().split("#else\n#include_next")[0]
    assert "ATen/Functions.h" not in operators and "operator op" in operators
    assert (folder / "ATen" / "ops" / "empty_like.h").is_file()
    assert not list(folder.rglob("*.part"))

    # a cuBLAS handle or a device property needs the real CUDAContext.h; a guard gets its header back
    for extra in ("at::cuda::getCurrentCUDABlasHandle();", "at::cuda::getCurrentDeviceProperties();"):
        other_folder = fastbuild.op_header_shim(tmp_path, {"cuda_sources": [src + extra]})
        assert other_folder is not None and other_folder != folder
        assert not (other_folder / "ATen" / "cuda" / "CUDAContext.h").exists()
        assert (other_folder / "ATen" / "ops" / "cat.h").is_file()
    guarded = fastbuild.op_header_shim(
        tmp_path,
        {"cuda_sources": [src + "const at::cuda::OptionalCUDAGuard g(x.device()); at::DeviceGuard d;"]},
    )
    assert guarded is not None
    assert "#include <ATen/DeviceGuard.h>" in (guarded / "torch" / "types.h").read_text()

    # lean=False: the plain shim, one types.h and nothing else
    plain = fastbuild.op_header_shim(tmp_path, {"cuda_sources": [src]}, lean=False)
    assert plain is not None and plain != folder
    files = [p.relative_to(plain).as_posix() for p in plain.rglob("*") if p.is_file()]
    assert sorted(files) == ["manifest.json", "torch/types.h"]  # and its manifest (the referee made it)


def test_lean_shim_files_are_whole_when_threads_make_them_at_once(tmp_path: Path) -> None:
    src = (
        "#include <torch/types.h>\ntorch::Tensor f(torch::Tensor x) { return torch::cat({x, x}, 0).relu(); }"
    )
    folders: list[Path | None] = []
    threads = [
        threading.Thread(
            target=lambda: folders.append(fastbuild.op_header_shim(tmp_path, {"cuda_sources": [src]}))
        )
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(folders)) == 1 and folders[0] is not None
    assert not list(folders[0].rglob("*.part"))
    assert (folders[0] / "ATen" / "ops" / "cat.h").read_text().endswith("#endif\n")


@pytest.mark.slow
def test_nvcc_compiles_tensor_list_and_tensor_methods_with_the_lean_shim(tmp_path: Path) -> None:
    """The lean operator headers declare what the full ones do: a braced tensor list (at::ITensorListRef,
    complete only in IListRef.h), factories with options and methods all compile with nvcc."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    import torch.utils.cpp_extension as ext

    src = (
        "#include <torch/types.h>\n"
        "torch::Tensor f(torch::Tensor x) {\n"
        "  auto y = torch::empty_like(x); auto z = torch::zeros({4}, x.options().dtype(torch::kFloat32));\n"
        "  auto parts = torch::cat({x, y}, 0).split(2); return torch::relu(parts[0]).sum() + z; }\n"
    )
    folder = fastbuild.op_header_shim(tmp_path, {"cuda_sources": [src]})
    assert folder is not None and (folder / "ATen" / "ops" / "cat.h").is_file()
    (tmp_path / "t.cu").write_text(src)
    includes = [f"-I{folder}", *(f"-I{p}" for p in ext.include_paths())]
    cmd = [nvcc, "-std=c++17", "-arch=sm_90", "-c", str(tmp_path / "t.cu"), "-o", str(tmp_path / "t.o")]
    run = subprocess.run([*cmd, *includes], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]


def test_standard_recipe_builds_once_as_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fastbuild.RECIPE_ENV, "standard")
    seen: list[dict[str, Any]] = []
    recorder = KernelRecorder()
    with pytest.raises(RuntimeError, match="torch::nn"):
        _build(
            _fake_builder(True, seen),
            {"name": "m", "cuda_sources": ["__global__ void k(){}"]},
            tmp_path,
            "c",
            recorder,
        )
    assert len(seen) == 1


def _fake_cxx(tmp_path: Path, seconds: float = 0.0) -> Path:
    """A compiler that records its arguments and writes the `-o` file (after `seconds`), standing in
    for g++."""
    script = tmp_path / "fake-cxx"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {tmp_path}/cxx-calls\n'
        f"sleep {seconds}\n"
        'while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then echo pch > "$2"; fi; shift; done\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_make_pch_from_a_finished_build(tmp_path: Path) -> None:
    cxx = _fake_cxx(tmp_path)
    build = tmp_path / "build"
    build.mkdir()
    (build / "build.ninja").write_text(
        f"ninja_required_version = 1.3\ncxx = {cxx}\n"
        "cflags = -DTORCH_EXTENSION_NAME=cand_1 -DTORCH_API_INCLUDE_EXTENSION_H -fPIC -std=c++17 -O3\n"
        "rule compile\n  command = $cxx $cflags -c $in -o $out\n"
    )
    folder = tmp_path / "pch" / "key"
    assert pch.with_pch({"name": "m"}, folder) is None  # nothing made yet
    spent = pch.make_pch(folder, build)
    assert spent is not None
    call = (tmp_path / "cxx-calls").read_text()
    assert "-x c++-header" in call and call.count("-O3") == 1 and "TORCH_EXTENSION_NAME" not in call
    assert (folder / pch.PCH_FILE).read_text() == "pch\n"
    assert (folder / "torch" / "extension.h").resolve().name == "extension.h"  # the real header, linked
    assert pch.make_pch(folder, build) is None  # exists: nobody makes it again
    args = pch.with_pch({"name": "m", "extra_include_paths": ["/inc"]}, folder)
    assert args is not None and args["extra_include_paths"] == [str(folder), "/inc"]


def _ninja(cxx: Path, whole: bool = True) -> str:
    """A ninja file as load_inline writes it; cut before its last line when not `whole`."""
    text = (
        f"ninja_required_version = 1.3\ncxx = {cxx}\n"
        "cflags = -DTORCH_EXTENSION_NAME=cand_1 -fPIC -std=c++17 -O3\n"
        "rule compile\n  command = $cxx $cflags -c $in -o $out\n"
        "build main.o: compile main.cpp\n"
    )
    return text + ("default m.so\n" if whole else "")


def _builds_here(root: Path) -> Any:
    """A runner's build request answered by the referee's build in this process (not confined)."""
    from kbench.backends.buildcache import build_key
    from kbench.backends.jitbuild import run
    from kbench.referee.builds import build

    return lambda arguments: build(arguments, build_key(arguments), root, run)


def _adopt_pch(made: Path, folder: Path) -> None:
    """A precompiled header as the referee keeps one: made elsewhere, adopted into `folder` with its
    manifest."""
    (made / "torch").mkdir(parents=True)
    (made / pch.PCH_FILE).write_text("pch")
    assert pch.adopt(made, folder) and pch.ready(folder)


def _loads_apart(cxx: Path, log: list[str], fail: bool = False) -> Any:
    """A load_inline that writes its ninja file and then builds as torch's does (`_run_ninja_build`, which
    a maker replaces by a stop). The candidate's build waits until the maker's header exists: it returns
    only if the header was made while it ran."""

    def load_inline(**arguments: Any) -> str:
        from torch.utils import cpp_extension

        build = Path(arguments["build_directory"])
        (build / "build.ninja").write_text(_ninja(cxx))
        if arguments["name"] == "kbench_pch_probe":
            log.append(f"probe sources: {arguments['cpp_sources']} {arguments.get('cuda_sources')}")
            cpp_extension._run_ninja_build(str(build), False, "")
            raise AssertionError("a maker's probe went on to build")
        if fail:
            raise RuntimeError("Error building extension 'm'")
        deadline = time.monotonic() + 10
        while (
            not list(build.parent.parent.glob(f"*-pch-*/pch/{pch.PCH_FILE}")) and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        log.append(
            f"pch during the build: {bool(list(build.parent.parent.glob(f'*-pch-*/pch/{pch.PCH_FILE}')))}"
        )
        (build / "m.so").write_text("binary")
        return "module"

    return load_inline


def test_the_pch_is_made_by_a_maker_of_its_own_beside_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared precompiled header is never made by the process that compiles a candidate's sources: a
    maker of its own, started beside the build, writes the ninja file of a probe with the build's flags
    and no candidate source, precompiles the header with them, and the referee adopts it."""
    monkeypatch.setenv(pch.PCH_ENV, "make")
    monkeypatch.setenv(fastbuild.OPS_ENV, "0")
    monkeypatch.setattr(pch, "_torch_header", lambda: tmp_path / "extension.h")
    cxx = _fake_cxx(tmp_path, seconds=0.2)
    args = {"name": "m", "cuda_sources": [CUDA], "extra_cflags": ["-O3"]}
    folder = pch.pch_dir(tmp_path, args, {"torch": "x"})
    monkeypatch.setattr(pch, "pch_dir", lambda *a: folder)
    log: list[str] = []
    recorder = KernelRecorder()
    assert _build(_loads_apart(cxx, log), args, tmp_path, "k", recorder)
    assert log[0] == "probe sources: ['// kbench: the probe of a precompiled header'] None", log
    assert "pch during the build: True" in log
    assert recorder.extra["pch_seconds"] >= 0 and recorder.extra["build_recipe"] == "light-headers"
    calls = (tmp_path / "cxx-calls").read_text().splitlines()
    assert len(calls) == 1 and "-x c++-header" in calls[0] and "cand_1" not in calls[0]
    assert (tmp_path / "k" / "m.so").is_file() and pch.ready(folder)

    recorder = KernelRecorder()  # the next build of the batch finds it and makes none
    _build(_fake_builder(False, []), args, tmp_path, "k2", recorder)
    assert "pch" in recorder.extra["build_recipe"] and "pch_seconds" not in recorder.extra


def _making_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Builds that make precompiled headers, of a stand-in torch header, into the folder returned."""
    monkeypatch.setenv(pch.PCH_ENV, "make")
    monkeypatch.setenv(fastbuild.OPS_ENV, "0")
    monkeypatch.setattr(pch, "_torch_header", lambda: tmp_path / "extension.h")
    folder = tmp_path / "pch"
    monkeypatch.setattr(pch, "pch_dir", lambda *a: folder)
    return folder


def test_a_failed_build_still_gets_the_pch_made_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _making_headers(tmp_path, monkeypatch)
    loader = _loads_apart(_fake_cxx(tmp_path, seconds=0.5), [], fail=True)
    with pytest.raises(RuntimeError, match="Error building"):
        _build(loader, {"name": "m", "cpp_sources": "int f();"}, tmp_path, "k", KernelRecorder())
    # the maker was waited for, and the referee adopted what it made
    assert pch.ready(folder) and not list(folder.glob("torch/*.part"))


def test_a_probe_load_inline_refuses_makes_no_header_and_costs_the_build_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _making_headers(tmp_path, monkeypatch)
    built = _fake_builder(False, [])

    def load(**arguments: Any) -> str:
        if arguments["name"] == "kbench_pch_probe":
            raise RuntimeError("no compiler for these flags")
        return built(**arguments)

    recorder = KernelRecorder()
    assert _build(load, {"name": "m", "cpp_sources": "int f();"}, tmp_path, "k", recorder)
    assert "pch_seconds" not in recorder.extra and not pch.ready(folder)
    assert (tmp_path / "k" / "m.so").is_file()


def test_one_maker_per_pch(tmp_path: Path) -> None:
    folder = tmp_path / "pch"
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(pch._claim(folder))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 7 + [True]
    old = (folder / ".claim").stat().st_mtime - 2 * pch._CLAIM_STALE_S
    os.utime(folder / ".claim", (old, old))  # its maker died long ago
    assert pch._claim(folder)


def test_pch_key_follows_the_flags(tmp_path: Path) -> None:
    tool = {"torch": "2.x", "cxx": "g++ 13"}
    a = pch.pch_dir(tmp_path, {"cpp_sources": "x", "extra_cflags": ["-O3"]}, tool)
    assert a == pch.pch_dir(tmp_path, {"cpp_sources": "y", "extra_cflags": ["-O3"]}, tool)
    assert a != pch.pch_dir(tmp_path, {"cpp_sources": "x", "extra_cflags": ["-O2"]}, tool)
    assert a != pch.pch_dir(tmp_path, {"cuda_sources": "x", "extra_cflags": ["-O3"]}, tool)
    assert a != pch.pch_dir(
        tmp_path, {"cpp_sources": "x", "extra_cflags": ["-O3"]}, {**tool, "cxx": "g++ 14"}
    )


def test_gcc_uses_the_pch_and_a_repeated_include_still_compiles(tmp_path: Path) -> None:
    """The real compiler: the PCH is valid for the build's flags, and a second include of the header
    (candidates often repeat the one load_inline inserts) resolves through the PCH folder."""
    import shutil
    import subprocess

    if shutil.which("c++") is None:
        pytest.skip("no C++ compiler")
    include = tmp_path / "include" / "torch"
    include.mkdir(parents=True)
    header = include / "extension.h"
    header.write_text("#pragma once\ninline int answer() { return 42; }\n")
    build = tmp_path / "build"
    build.mkdir()
    flags = f"-DTORCH_EXTENSION_NAME=a -isystem {tmp_path / 'include'} -fPIC -std=c++17 -O2"
    (build / "build.ninja").write_text(f"cxx = c++\ncflags = {flags}\n")
    folder = tmp_path / "pch"
    assert pch.make_pch(folder, build, header) is not None
    main = tmp_path / "main.cpp"
    main.write_text(
        "#include <torch/extension.h>\n#include <torch/extension.h>\nint main() { return answer() - 42; }\n"
    )
    proc = subprocess.run(
        [
            "c++",
            "-DTORCH_EXTENSION_NAME=b",
            f"-I{folder}",
            *flags.split()[1:],
            "-Winvalid-pch",
            "-H",
            str(main),
            "-o",
            str(tmp_path / "main"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"! {folder}/torch/extension.h.gch" in proc.stderr  # -H marks a used PCH with '!'
    assert subprocess.run([str(tmp_path / "main")]).returncode == 0


def test_the_sessions_seeded_cache_holds_a_sealed_header_its_maker_made(shared_builds: Path) -> None:
    """The real thing: the session's seed build (conftest.shared_builds, precompiled headers on) ran a
    confined maker beside it with g++, and the referee adopted its header sealed."""
    folders = [f for f in (shared_builds / ".pch").iterdir() if f.is_dir()]
    assert folders and all(pch.sound(f) and (f / pch.PCH_FILE).stat().st_size > 1 << 20 for f in folders)
    assert not list((shared_builds / ".staging").glob("*-pch-*"))  # the maker's folder went with it
