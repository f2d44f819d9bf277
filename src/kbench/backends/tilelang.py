"""`tilelang`: candidates with TileLang kernels (`@T.prim_func` / `@tilelang.jit`, `pip install 'kbench[tilelang]'`).

A candidate builds its kernels with `tilelang.compile(func, out_idx=[...])` or through `tilelang.jit`, never
naming a target: the worker's environment names it (`TILELANG_DEFAULT_TARGET`): `cuda` on a GPU, `c` on the
CPU, where TileLang lowers a kernel to C, builds it with the host's compiler and runs it on the host (the
GELU fixture: 2-3 s to build on a busy core, max abs error 2.4e-7). Each call of a compiled kernel goes
through the recorder (`JITKernel.__call__`) under its prim_func's name, so the kernel-unused rule and the
ablation call see it on the CPU and on a GPU alike (one dict update a call when not ablating).

Seen running on the CPU: elementwise kernels over global buffers with `T.Parallel` / `T.serial` loops and
`T.exp`, `T.tanh`, `T.max`, `T.if_then_else`. The worker builds CPU kernels without vectorization: TileLang
0.1.15's C code generator cannot print a transcendental call (`tirx.exp`) or a `T.max` on a vector of 4
floats. What does not run there: `T.gemm`, `T.alloc_fragment` / `T.alloc_shared` tiles ("CPU fill only
supports local and global buffers"); such a kernel's build ends the evaluation with a message that says it
does not lower to C and whether it compiles for sm_90a (nvcc, in the worker): a `build_error` when the
candidate builds it at import or in `__init__`, a `runtime_error` when in `forward`.

On a GPU a prim_func `f` runs as the CUDA kernel `f_kernel` (`extern "C"`, read from TileLang's CUDA
codegen; `kernel_symbols`). `T.gemm` on float32 operands runs on TF32 tensor cores (`mma_sync<kTensorFloat32>`
on sm_90a): the precision-downgrade rule reports it on an fp32 problem. Kernels are never autotuned inside an
evaluation (a `tilelang.autotune` run raises). TileLang's kernel cache (compiled kernels and autotuner
results, default `~/.tilelang/cache`) is put in the runner's own home folder (referee/job.py `runner_env`),
never a folder another job reads; its temporary build files go to the runner's TMPDIR.

`compile_check` runs the candidate in a child process where every kernel it builds is lowered for the arch
and compiled with nvcc instead (no GPU needed; kernel calls there return unfilled outputs).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kbench.backends import Backend, CompileCheck, KernelRecorder, register_backend
from kbench.backends.dryrun import feature_arch
from kbench.errors import ConfigError, require

_PRIM_FUNC = ("tilelang.language.prim_func", "tilelang.language.eager.prim_func", "tvm.script.tir.prim_func")
_JIT = ("tilelang.jit", "tilelang.jit.jit", "tilelang.autotune", "tilelang.autotuner.autotune")
_LOW_DTYPE = re.compile(r"(float16|bfloat16|half|tfloat32|float8_\w+|float6_\w+|float4_\w+)(x\d+)?")
_GEMM = re.compile(r"tilelang\.language\.\w*gemm\w*")
SUFFIX = "_kernel"  # TileLang's CUDA codegen names the device function of a prim_func `f` `f_kernel`
CPU_TARGET = "c"
_NO_VECTORIZE = "tirx.disable_vectorize"  # PassConfigKey.TIR_DISABLE_VECTORIZE
_CHECK_TIMEOUT_S = (
    600.0  # a T.gemm kernel takes ~14 s of nvcc for sm_90a on a busy core; TileLang's import ~3 s
)
_CHECK_SCRIPT = "import sys; from kbench.backends.tilelang import check_main; check_main(sys.argv[1:])"


class TileLangCPUError(RuntimeError):
    """A kernel that TileLang cannot lower to C: the candidate's failure on the CPU, without TVM's stack."""


@register_backend("tilelang")
class TileLangBackend(Backend):
    title = "TileLang"
    package = "tilelang"
    gpu_kernels = True
    prebuilds = False  # kernels are JIT-compiled when the candidate builds them, on the machine that runs it
    cpu_run = "compiled to C by TileLang (tiles in local buffers only)"
    code_names = ("tilelang", "T", "tvm")
    runner_imports = ("tilelang",)
    missing_kernel = "no @T.prim_func or @tilelang.jit function"
    detect_rank = 5  # the no-kernel hint tries it after CuTe (4)

    def find_kernels(self, ctx: Any) -> list[str]:
        """Functions decorated with `T.prim_func` or `tilelang.jit` / `tilelang.autotune` (bare or called),
        in every import spelling; a jit factory and the prim_func it returns are both listed."""

        def tilelang_decorator(dec: ast.expr) -> bool:
            name = ctx.qualname(dec.func if isinstance(dec, ast.Call) else dec) or ""
            return name in _PRIM_FUNC or name in _JIT

        found = [
            node
            for node in ctx.nodes
            if isinstance(node, ast.FunctionDef) and any(map(tilelang_decorator, node.decorator_list))
        ]
        return [node.name for node in sorted(found, key=lambda n: n.lineno)]  # the walk is breadth-first

    def kernel_symbols(self, names: list[str]) -> list[str]:
        """The CUDA kernels' names, as the profiler lists them (`f` -> `f_kernel`), and only those: a
        prim_func is often called `main`, a bare name a library kernel's name could hold as a word."""
        return [n + SUFFIX for n in names]

    def low_precision(self, ctx: Any) -> list[tuple[int, str]]:
        """Low-precision dtypes in TileLang's spelling (`T.float16`, the strings "float16", "bfloat16",
        "float8_e4m3"... in `T.Tensor`, `T.alloc_*`, `T.cast`) and `T.gemm`, which runs float32 operands on
        TF32 tensor cores."""
        found: list[tuple[int, str]] = []
        for node in ctx.nodes:
            if isinstance(node, ast.Attribute):
                name = ctx.qualname(node) or ""
                if name.startswith("tilelang.language.") and _LOW_DTYPE.fullmatch(node.attr):
                    found.append((node.lineno, name))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if _LOW_DTYPE.fullmatch(node.value):
                    found.append((node.lineno, f"the TileLang dtype {node.value!r}"))
            elif isinstance(node, ast.Call) and _GEMM.fullmatch(ctx.call_name(node) or ""):
                found.append((node.lineno, f"{ctx.call_name(node)} (float32 operands run as TF32)"))
        return found

    def check_environment(self, device: str) -> None:
        require("tilelang", "tilelang")
        if device.startswith("cuda"):
            from kbench.hardware import gpu_count

            if gpu_count() == 0:
                raise ConfigError(
                    "no CUDA GPU is visible to torch; use --device cpu to run TileLang's C target"
                )

    def job_env(self, device: str) -> dict[str, str]:
        # The target from the environment: a candidate names none. No two log lines on every compile.
        return {
            "TILELANG_DEFAULT_TARGET": "cuda" if device.startswith("cuda") else CPU_TARGET,
            "TILELANG_PRINT_ON_COMPILATION": "0",
        }

    def install_hooks(self, recorder: KernelRecorder, cache_dir: Path, request: Any = None) -> None:
        super().install_hooks(recorder, cache_dir, request)
        # TileLang reads its cache folder at each use; its default was expanded when it was imported, which
        # a warm starter may have done under another HOME. The runner's HOME is its own.
        os.environ["TILELANG_CACHE_DIR"] = str(Path.home() / ".tilelang" / "cache")
        try:
            import importlib

            # the module: the package's attribute `tilelang.jit` is the decorator of the same name
            jit_module = importlib.import_module("tilelang.jit")
            from tilelang.autotuner.tuner import AutoTuner
            from tilelang.jit.kernel import JITKernel
        except ImportError:
            return  # not installed: the candidate's own import fails and says so
        _count_calls(JITKernel, recorder)
        _refuse_autotuning(AutoTuner)
        if os.environ.get("TILELANG_DEFAULT_TARGET") == CPU_TARGET:
            _compile_for_cpu(jit_module, recorder)

    def compile_check(
        self, source: str, arch: str = "sm_90", problem: str | Path | None = None, preset: str = "small"
    ) -> CompileCheck:
        """Run `source` in a child process where every kernel it builds is compiled for `arch` with nvcc
        instead of built for this machine: those it builds at import, and with `problem` (a problem file)
        those its `ModelNew(*get_init_inputs())` and one forward on the problem's CPU inputs build. Kernel
        calls there return unfilled outputs, so only code paths that do not read them are followed."""
        import tempfile

        require("tilelang", "tilelang")
        with tempfile.TemporaryDirectory(prefix="kbench-tilelang-check-") as tmp:
            path = Path(tmp, "candidate.py")
            path.write_text(source)
            env = os.environ | {
                "TMPDIR": tmp,
                "TILELANG_CACHE_DIR": tmp,
                "TILELANG_PRINT_ON_COMPILATION": "0",
            }
            argv = [str(path), arch, str(Path(problem).resolve()) if problem else "", preset]
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-c", _CHECK_SCRIPT, *argv],
                env=env, capture_output=True, text=True, timeout=_CHECK_TIMEOUT_S, cwd=tmp,
            )  # fmt: skip
        seconds = time.perf_counter() - t0
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            return CompileCheck(False, (proc.stdout + proc.stderr)[-4000:], (), seconds)
        out = json.loads(lines[-1])
        return CompileCheck(out["ok"], out["log"], tuple(out["kernels"]), seconds)


def _symbol(func: Any) -> str:
    """A prim_func's name: the kernel's name in the recorder, `f` of the CUDA kernel `f_kernel`."""
    attrs = getattr(func, "attrs", None)
    return str(attrs["global_symbol"]) if attrs and "global_symbol" in attrs else "tilelang_kernel"


def _count_calls(cls: Any, recorder: KernelRecorder) -> None:
    original = cls.__call__

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        run = lambda *a, **k: original(self, *a, **k)  # noqa: E731
        return recorder.call(_symbol(getattr(self, "prim_func", None)), run, args, kwargs)

    cls.__call__ = call


def _refuse_autotuning(cls: Any) -> None:
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "tilelang.autotune is off inside a kbench evaluation (its search would compile and time every "
            "configuration here): pass the kernel factory its block sizes"
        )

    cls.run = run


def _compile_for_cpu(jit_module: Any, recorder: KernelRecorder) -> None:
    """Every kernel `tilelang.compile` / `tilelang.jit` builds goes through TileLang's `cached`, which the
    jit module names: built without vectorization for C, and a kernel that does not lower to C is a
    TileLangCPUError that says so, after it was compiled for sm_90a instead."""
    original = jit_module.cached

    def cached(func: Any = None, out_idx: Any = None, *args: Any, **kwargs: Any) -> Any:
        configs = kwargs.get("pass_configs")
        kwargs["pass_configs"] = {**(configs or {}), _NO_VECTORIZE: True}
        try:
            return original(func, out_idx, *args, **kwargs)
        except Exception as exc:  # TVM's errors: the candidate's kernel, reported as data
            message = cpu_failure(func, exc, configs)
            recorder.build_failed, recorder.build_log = True, message
            raise TileLangCPUError(message) from None

    jit_module.cached = cached


def cpu_failure(func: Any, exc: BaseException, pass_configs: dict[str, Any] | None) -> str:
    """Why `func` does not run on the CPU: the last line of TileLang's error, and whether it compiles for a
    GPU (sm_90a, with nvcc) all the same."""
    name = _symbol(func)
    reason = next((line for line in reversed(str(exc).splitlines()) if line.strip()), type(exc).__name__)
    text = (
        f"TileLang kernel {name!r} does not lower to the CPU's C target (T.gemm, fragment and shared "
        f"buffers run only on a GPU): {reason[:300]}"
    )
    try:
        ok, log, _ = cuda_check(func, "sm_90", pass_configs)
    except Exception as check_exc:  # no nvcc, or TileLang cannot lower it for CUDA either
        return f"{text}\nnot compiled for sm_90a: {type(check_exc).__name__}: {str(check_exc)[-600:]}"
    return f"{text}\n" + (
        "it compiles for sm_90a (nvcc)" if ok else f"nor does it compile for sm_90a:\n{log}"
    )


def cuda_check(
    func: Any, arch: str, pass_configs: dict[str, Any] | None = None
) -> tuple[bool, str, list[str]]:
    """Lower one prim_func for CUDA `arch` and compile it with nvcc, no GPU needed: (ok, log, kernels)."""
    import tilelang
    from tilelang import tvm
    from tvm.target import Target

    target = Target({"kind": "cuda", "arch": feature_arch(arch)})
    try:
        with tvm.transform.PassContext(opt_level=3, config=pass_configs or {}), target:
            artifact = tilelang.lower(func, target=target, enable_device_compile=True)
    except Exception as exc:  # the compiler's errors (nvcc's among them) are the candidate's, as data
        return False, str(exc)[-3000:], []
    kernels = re.findall(
        r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\(", artifact.kernel_source
    )
    return True, "", list(dict.fromkeys(kernels))


def check_main(argv: list[str]) -> None:
    """The compile check's child (`TileLangBackend.compile_check`): prints {"ok", "log", "kernels"}."""
    import importlib

    path, arch, problem, preset = argv
    jit_module: Any = importlib.import_module("tilelang.jit")

    os.environ["TILELANG_DEFAULT_TARGET"] = json.dumps({"kind": "cuda", "arch": feature_arch(arch)})
    kernels: list[str] = []
    logs: list[str] = []

    def cached(func: Any = None, out_idx: Any = None, *args: Any, **kwargs: Any) -> Any:
        ok, log, names = cuda_check(func, arch, kwargs.get("pass_configs"))
        kernels.extend(names)
        if not ok:
            logs.append(f"{_symbol(func)}: {log}")
            raise TileLangCPUError(log)
        return _Unfilled(func, out_idx)

    jit_module.cached = cached
    error = _run_candidate(path, problem, preset)
    ok = not logs and not error and bool(kernels)
    log = "\n".join([*logs, error or ("" if kernels else "no TileLang kernel was built")])
    print(json.dumps({"ok": ok, "log": log.strip()[-4000:], "kernels": kernels}))


def _run_candidate(path: str, problem: str, preset: str) -> str:
    """Import the candidate; with a problem, build ModelNew and run one forward. '' or the error's text."""
    import traceback

    from kbench.backends.dryrun import forward_once, load_module

    try:
        module = load_module("kbench_candidate", path)
        if problem:
            forward_once(module, problem, preset)
    except TileLangCPUError:
        return ""  # its log is already kept
    except Exception as exc:  # the candidate's code: reported as data
        return "".join(traceback.format_exception(exc)[-4:])
    return ""


class _Unfilled:
    """A kernel compiled for a GPU, called where there is none: its outputs allocated, never written."""

    def __init__(self, func: Any, out_idx: Any) -> None:
        self.prim_func, self.out_idx = func, [out_idx] if isinstance(out_idx, int) else list(out_idx or [])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        params = list(self.prim_func.params)
        outs = []
        for i in self.out_idx:
            buf = self.prim_func.buffer_map[params[i]]
            shape = [int(s) for s in buf.shape]
            outs.append(torch.empty(shape, dtype=getattr(torch, str(buf.dtype))))
        return outs[0] if len(outs) == 1 else (outs or None)
