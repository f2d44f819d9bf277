"""Backends: registry, content-addressed build keys, races between builders, CUDA compile checks."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kbench.backends import KernelRecorder, backend_names, get_backend
from kbench.backends.buildcache import MANIFEST, _count_calls, build_key, verified
from kbench.backends.cudasrc import cuda_strings, kernels_only
from kbench.errors import ConfigError

FIXTURES = Path(__file__).parents[1] / "fixtures" / "backends"


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


def test_registry() -> None:
    # cute, helion, tilelang: plugins (entry points), registered whether or not their DSL is installed
    assert backend_names() == ["cpp", "cuda", "cute", "helion", "tilelang", "triton"]
    with pytest.raises(ConfigError, match=f"choose one of: {', '.join(backend_names())}"):
        get_backend("rocm")


def test_cpp_backend_refuses_a_gpu_device() -> None:
    with pytest.raises(ConfigError, match="--device cpu"):
        get_backend("cpp").check_environment("cuda")


def test_build_key_is_content_addressed() -> None:
    args = {"name": "m", "cpp_sources": ["int f();"], "extra_cflags": ["-O3"], "verbose": False}
    assert build_key(args) == build_key(dict(args, verbose=True, build_directory="/elsewhere"))
    assert build_key(args) != build_key(dict(args, cpp_sources=["int g();"]))
    assert build_key(args) != build_key(dict(args, extra_cflags=["-O2"]))


def test_concurrent_builders_leave_one_entry(tmp_path: Path) -> None:
    calls: list[str] = []

    def fake_load_inline(**arguments: Any) -> str:
        time.sleep(0.2)  # both builders are inside the build at once
        Path(arguments["build_directory"], "m.so").write_text("binary")
        calls.append(arguments["build_directory"])
        return "module"

    results: list[str] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(
                _build(fake_load_inline, {"name": "m"}, tmp_path, "k", KernelRecorder())
            )
        )
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["module"] * 3 and len(set(calls)) == 3
    assert (tmp_path / "k" / MANIFEST).exists() and (tmp_path / "k" / "m.so").read_text() == "binary"
    assert verified(tmp_path / "k") is not None
    assert list((tmp_path / ".staging").iterdir()) == []


def test_failed_build_leaves_no_staging(tmp_path: Path) -> None:
    def broken(**arguments: Any) -> None:
        raise RuntimeError("Error building extension 'm'")

    with pytest.raises(RuntimeError):
        _build(broken, {"name": "m"}, tmp_path, "k", KernelRecorder())
    assert not (tmp_path / "k").exists() and list((tmp_path / ".staging").iterdir()) == []


DIAGNOSTIC = "Error building extension 'm': main.cpp:3:9: error: 'bb' was not declared in this scope"


def test_what_the_compiler_said_no_to_is_not_compiled_again(tmp_path: Path) -> None:
    """A build error with the compiler's diagnostic is kept under the build's key (sealed like a build): the
    same arguments get the same error from the record; a changed record is not believed."""
    from kbench.backends.jitbuild import run
    from kbench.referee import builds
    from kbench.sandbox.commands import BuildRequest

    calls: list[str] = []

    def broken(**arguments: Any) -> None:
        calls.append(arguments["build_directory"])
        raise RuntimeError(DIAGNOSTIC)

    builder = builds.Builder(tmp_path, 60.0, {}, confined=False)
    builder._spawn = lambda request: run(request, broken)  # type: ignore[method-assign]
    request = BuildRequest(arguments={"name": "m", "cpp_sources": "torch::Tensor f(torch::Tensor x) { bb; }"})
    first = builder(request)
    assert not first.ok and not first.cache_hit and "'bb' was not declared" in first.log
    attempts = len(calls)  # every recipe was tried once
    again = builder(request)
    assert not again.ok and again.cache_hit and again.log == first.log and again.errors == first.errors
    assert len(calls) == attempts  # nothing compiled again
    other = builder(BuildRequest(arguments={"name": "m", "cpp_sources": "int g() { bb; }"}))
    assert not other.cache_hit and len(calls) > attempts  # another source compiles
    record = tmp_path / "builds" / builds.FAILED / build_key(request.arguments)
    assert builds.known_failure(tmp_path / "builds", record.name) is not None
    (record / "failure.json").write_text('{"log": "forged", "errors": {}}')
    assert builds.known_failure(tmp_path / "builds", record.name) is None  # the manifest no longer matches
    assert not builder(request).cache_hit


FAST = ["lite-header+pch", "pch", "standard (fast recipe failed)"]
NO_PCH = ["lite-header", "standard (fast recipe failed)"]  # no precompiled header ready yet


@pytest.mark.parametrize(
    ("said", "labels", "tried"),
    [
        (DIAGNOSTIC, FAST, ["lite-header+pch", "pch"]),  # the standard attempt would hear the same
        (DIAGNOSTIC, NO_PCH, None),  # no `pch` attempt: every recipe is tried
        ("c++: fatal error: Killed signal terminated program cc1plus", FAST, None),  # the machine's part
        (
            "main.cpp:1:10: fatal error: x/torch/extension.h.gch: had text segment at different address",
            FAST,
            None,
        ),
        (
            "main.cpp:1:10: fatal error: one or more PCH files were found, but they were invalid",
            FAST,
            None,
        ),
    ],
)
def test_a_diagnostic_of_the_precompiled_attempt_ends_the_attempts(
    tmp_path: Path, said: str, labels: list[str], tried: list[str] | None
) -> None:
    """`pch` is load_inline's own arguments with torch's header precompiled for the same flags: what the
    compiler says to it, the standard attempt would repeat, so a diagnostic there ends the build (a
    broken candidate's error comes ~15 s sooner); a killed compiler, or one that could not use the
    precompiled header itself, still tries on."""
    from kbench.backends.jitbuild import run

    calls: list[str] = []

    def broken(**arguments: Any) -> None:
        calls.append(Path(arguments["build_directory"]).name)
        raise RuntimeError(said)

    request = {"attempts": [[label, {}] for label in labels], "staging": str(tmp_path)}
    done = run(request, broken)
    assert not done["ok"] and list(done["errors"]) == (tried or labels)
    assert len(calls) == len(tried or labels)


SYNTAX = (
    "/b/attempt-0/main.cpp:2:15: error: expected primary-expression before \u2018return\u2019\n"
    "/b/attempt-0/main.cpp:2:14: error: expected \u2018)\u2019 before \u2018return\u2019\n"
)
CASCADE = (  # what the generated module's use of a function that did not parse then brings
    "/t/include/ATen/detail/FunctionTraits.h:11:58: error: \u2018operator()\u2019 is not a member of \u2018int\u2019\n"
)


@pytest.mark.parametrize(
    ("said", "tried"),
    [
        (SYNTAX + CASCADE, ["lite-header"]),  # no declaration makes it: the standard attempt would repeat it
        ('/b/main.cpp:9:8: error: missing terminating " character\n', ["lite-header"]),
        ("/b/main.cpp:4:3: error: \u2018bb\u2019 was not declared in this scope\n" + SYNTAX, None),
        ("/b/main.cpp:1:12: error: expected initializer before \u2018f\u2019\n", None),  # an unknown macro's
        (
            "/b/main.cpp:7:1: error: expected constructor, destructor, or type conversion before \u2018(\u2019\n",
            None,
        ),
        ("/b/main.cpp:5:21: error: expected \u2018,\u2019 or \u2018;\u2019 before \u2018MACRO\u2019\n", None),
        (  # `struct S { int x MACRO; };`: a syntax error first, the unknown word's own after it
            "/b/main.cpp:1:16: error: expected \u2018;\u2019 at end of member declaration\n"
            "/b/main.cpp:1:18: error: \u2018MACRO\u2019 does not name a type\n",
            None,
        ),
        ("/b/main.cpp:3:1: error: #error this needs torch/extension.h\n" + SYNTAX, None),
        (
            "/x/torch/extension.h:12:3: error: expected \u2018;\u2019 before \u2018}\u2019 token\n",
            None,
        ),  # a header's
        (SYNTAX + "c++: fatal error: Killed signal terminated program cc1plus\n", None),  # the machine's part
    ],
)
def test_a_syntax_error_of_the_lite_header_attempt_ends_the_attempts(
    tmp_path: Path, said: str, tried: list[str] | None
) -> None:
    """The lite header declares less than torch's own, so a first error it could cause (a name, a type, an
    unknown macro's forms, an #error) lets the standard attempt try; a first error no declaration causes
    (a syntax error in main.cpp itself, whatever it then brings) is the sources' own, and the standard
    attempt (~25 s of a core without a precompiled header) would say it again."""
    from kbench.backends.jitbuild import run

    calls: list[str] = []

    def broken(**arguments: Any) -> None:
        calls.append(Path(arguments["build_directory"]).name)
        raise RuntimeError("Error building extension 'm':\n" + said)

    done = run({"attempts": [[label, {}] for label in NO_PCH], "staging": str(tmp_path)}, broken)
    assert not done["ok"] and list(done["errors"]) == (tried or NO_PCH) and len(calls) == len(tried or NO_PCH)


def test_a_syntax_error_under_a_conditional_lets_the_standard_attempt_try(tmp_path: Path) -> None:
    """A macro only torch's own header defines can choose what the compiler parses (`#ifndef TORCH_MODULE`
    around broken text): under the lite header alone a syntax error, under torch's header none. Sources
    with a preprocessor conditional never end the attempts at the lite header."""
    from kbench.backends.jitbuild import run

    calls: list[str] = []

    def broken(**arguments: Any) -> None:
        calls.append(Path(arguments["build_directory"]).name)
        raise RuntimeError("Error building extension 'm':\n" + SYNTAX + CASCADE)

    sources = {"cpp_sources": ["#ifndef TORCH_MODULE\nint f( { return 0; }\n#endif\nint g() { return 1; }"]}
    done = run({"attempts": [[label, sources] for label in NO_PCH], "staging": str(tmp_path)}, broken)
    assert not done["ok"] and list(done["errors"]) == NO_PCH and len(calls) == len(NO_PCH)


@pytest.mark.parametrize(
    "said, kept",
    [
        (DIAGNOSTIC, True),
        (
            "main.cpp:1:1: fatal error: torch/extension.h: No such file or directory\ncompilation terminated.",
            False,
        ),
        ("c++: fatal error: Killed signal terminated program cc1plus", False),  # the machine's part
        ("main.cpp:9:1: internal compiler error: Segmentation fault", False),
        ("main.cpp:9:1: error: x\n/tmp: No space left on device", False),
        ("Error building extension 'm'", False),  # no diagnostic at all
    ],
)
def test_only_the_compilers_own_verdict_is_kept(said: str, kept: bool) -> None:
    from kbench.backends.jitbuild import compiler_said_no

    assert compiler_said_no(said) is kept


def test_recorder_counts() -> None:
    r = KernelRecorder()
    r.hit("f")
    r.hit("f")
    assert r.calls == {"f": 2}


def test_only_calls_that_return_are_counted() -> None:
    """A call that raises did no work: a try/except PyTorch fallback must not count as the kernel running."""

    class Ext:
        @staticmethod
        def ok(x: int) -> int:
            return x + 1

        @staticmethod
        def strict(x: int) -> int:
            raise RuntimeError("expected a contiguous fp32 CPU tensor")

    ext, r = Ext(), KernelRecorder()
    _count_calls(ext, r)
    assert ext.ok(1) == 2
    with pytest.raises(RuntimeError):
        ext.strict(1)
    assert r.calls == {"ok": 1} and r.exported == {"ok", "strict"}


def test_cuda_strings_and_kernel_extraction() -> None:
    source = (FIXTURES / "cuda_relu.py").read_text()
    strings = cuda_strings(source)
    assert len(strings) == 1
    kernels = kernels_only(strings[0])
    assert "bias_relu_kernel" in kernels and "__device__ __forceinline__ T relu" in kernels
    assert "torch::Tensor bias_relu" not in kernels and "torch/extension.h" not in kernels


def _nvcc() -> None:
    from kbench.backends.cuda import nvcc_path

    if nvcc_path() is None:
        pytest.skip("nvcc is not installed")


def test_cuda_kernels_compile_check_sm90() -> None:
    _nvcc()
    backend = get_backend("cuda")
    good = backend.compile_check((FIXTURES / "cuda_relu.py").read_text(), "sm_90")
    assert good.ok, good.log
    bad = backend.compile_check((FIXTURES / "cuda_broken.py").read_text(), "sm_90")
    assert not bad.ok and "undeclared_name" in bad.log


@pytest.mark.slow
def test_cuda_full_compile_check_with_torch_headers() -> None:
    _nvcc()
    check = get_backend("cuda").compile_check((FIXTURES / "cuda_relu.py").read_text(), "sm_90", full=True)  # type: ignore[call-arg]
    assert check.ok, check.log
