"""`cute`: candidates with NVIDIA's CuTe DSL (`import cutlass.cute as cute`, `pip install 'kbench[cute]'`).

A candidate writes `@cute.kernel` device functions, launches them from `@cute.jit` host functions, and
calls `cute.compile(host_fn, *args)` once per shape; the compiled function is called with tensors converted
by `cutlass.cute.runtime.from_dlpack` and the current CUDA stream.

No CPU execution: the DSL has no interpreter, and calling a compiled function without a GPU fails with
`cudaErrorInsufficientDriver`, so an evaluation of a CuTe candidate needs a GPU (`needs_gpu`). What a
machine without a GPU can do is compile: `compile_check` lowers the candidate's jit functions to PTX for
an arch (backends/cutecheck.py says exactly what it compiles), and the static checks read its text.

On a GPU the profiler lists each `@cute.kernel def f` under the symbol `kernel_cutlass_f_<argument
types>_<n>` (read from the generated PTX's `.entry`; `kernel_symbols`). A kernel the candidate renamed with
`set_name_prefix` runs under a name kbench does not know: it counts as a library kernel, not the
candidate's own. Each call of a compiled function (`cute.compile`'s result, or its `.to(device)`
executor) goes through the recorder; a `@cute.jit` function called directly (traced and compiled at every
call) is not counted, and in an ablation call its outputs are not spoilt.

Caches: the DSL keeps compiled functions in memory per process and, unless told otherwise, on disk under
`$TMPDIR/$USER/cutlass_python_cache`; a job's worker turns the disk cache off (a runner's folder is its
own and discarded, so nothing there would be read again) and dumps nothing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from kbench.backends import Backend, CompileCheck, KernelRecorder, register_backend
from kbench.errors import ConfigError, require

_KERNEL_DECORATORS = ("cutlass.cute.kernel",)
_JIT_DECORATORS = ("cutlass.cute.jit",)
SYMBOL_PREFIX = "kernel_cutlass_"  # `@cute.kernel def f` runs as `kernel_cutlass_f_<argument types>_<n>`
# Numeric types below fp32 (cutlass.Float16, cute.BFloat16, cutlass.Float8E4M3FN, cutlass.TFloat32...) and
# the MMA operations on them (cute.nvgpu.warpgroup.MmaF16BF16Op, warp.MmaF16BF16Op, tcgen05.MmaTF32Op...).
_LOW_NAMES = re.compile(
    r"^(B?Float16|TFloat32|Float8\w*|Float6\w*|Float4\w*|Mma\w*(F16|BF16|TF32|F8|FP8)\w*)$"
)


def _decorated(ctx: Any, node: ast.AST, names: tuple[str, ...]) -> bool:
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    for dec in node.decorator_list:
        name = ctx.qualname(dec.func if isinstance(dec, ast.Call) else dec) or ""
        if name in names:
            return True
    return False


@register_backend("cute")
class CuteBackend(Backend):
    title = "CuTe DSL"
    package = "nvidia-cutlass-dsl"
    prompt_title = "CuTe DSL (NVIDIA CUTLASS's Python DSL)"
    prebuilds = False  # compiled at run time by the DSL, on the GPU host
    gpu_kernels = True
    needs_gpu = True  # no interpreter: a compiled CuTe function runs on a GPU only
    cpu_compile = "its kernels compile for sm_90a here: python -m kbench.backends.cutecheck FILE [PROBLEM]"
    code_names = ("cutlass", "cute")
    runner_imports = ()  # imported by install_hooks, before the candidate and the guards' snapshot
    missing_kernel = "no @cute.kernel function launched from a @cute.jit function"
    detect_rank = 4

    def find_kernels(self, ctx: Any) -> list[str]:
        """`@cute.kernel` device functions, then `@cute.jit` host functions, in every import spelling
        (`import cutlass.cute as cute`, `from cutlass import cute`, `import cutlass`, `from cutlass.cute
        import kernel, jit`), bare or called with settings."""
        kernels = [n.name for n in ctx.nodes if _decorated(ctx, n, _KERNEL_DECORATORS)]
        hosts = [n.name for n in ctx.nodes if _decorated(ctx, n, _JIT_DECORATORS)]
        return [*kernels, *hosts]

    def kernel_symbols(self, names: list[str]) -> list[str]:
        """The device symbols of the kernels, as the profiler lists them (`kernel_cutlass_<name>_...`), and
        only those: a bare name would also match a library kernel that names it (`elementwise_kernel<4,
        gelu_tanh>`), and a host function's name never reaches the device."""
        return [n if n.startswith(SYMBOL_PREFIX) else SYMBOL_PREFIX + n for n in names]

    def low_precision(self, ctx: Any) -> list[tuple[int, str]]:
        """CuTe's own types below fp32 and the MMA operations on them, in any spelling that resolves to
        `cutlass.` (`cutlass.Float16`, `cute.BFloat16`, `from cutlass import TFloat32`), and
        `from_dlpack(..., force_tf32=True)`."""
        found: list[tuple[int, str]] = []
        for node in ctx.nodes:
            if isinstance(node, ast.Attribute | ast.Name):
                name = ctx.qualname(node) or ""
                if name.startswith("cutlass.") and _LOW_NAMES.match(name.rsplit(".", 1)[1]):
                    found.append((node.lineno, name))
            elif isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg == "force_tf32" and isinstance(kw.value, ast.Constant) and kw.value.value:
                        found.append((node.lineno, "from_dlpack(force_tf32=True)"))
        return found

    def check_environment(self, device: str) -> None:
        if self.version() is None:
            raise ConfigError(
                "the cute backend needs NVIDIA's CuTe DSL; install it with: pip install 'kbench[cute]'"
            )
        if not device.startswith("cuda"):
            raise ConfigError(
                f"CuTe DSL kernels run only on an NVIDIA GPU (got --device {device!r}): use --device cuda on a "
                "GPU machine; without one, a candidate can only be compile-checked "
                "(kbench.backends.cute: CuteBackend.compile_check, `python -m kbench.backends.cutecheck FILE`)"
            )
        from kbench.hardware import gpu_count

        if gpu_count() == 0:
            raise ConfigError("no CUDA GPU is visible to torch; install a CUDA build of torch and a driver")

    def job_env(self, device: str) -> dict[str, str]:
        # The on-disk cache off: the runner's folder is its own and thrown away after the job, so a file
        # written there is never read again, and a folder shared between jobs would let one candidate's
        # compiled code stand in for another's. No dumps (CUTE_DSL_KEEP empty): a dump would go to the
        # working folder, the runner's own, and only cost time.
        return {"CUTE_DSL_DISABLE_FILE_CACHING": "1", "CUTE_DSL_KEEP": "", "CUTE_DSL_LOG_TO_FILE": "0"}

    def install_hooks(self, recorder: KernelRecorder, cache_dir: Path, request: Any = None) -> None:
        super().install_hooks(recorder, cache_dir, request)
        try:
            from cutlass.base_dsl.jit_executor import JitCompiledFunction, JitExecutor
            from cutlass.cute import runtime
        except ImportError:
            return  # not installed: the candidate's own import fails and says so
        _remember_torch_tensors(runtime._Tensor)
        for cls in (JitCompiledFunction, JitExecutor):
            _count_calls(cls, recorder)

    def compile_check(
        self, source: str, arch: str = "sm_90", problem: str | Path | None = None, preset: str = ""
    ) -> CompileCheck:
        """Compile the candidate's CuTe code for `arch` without a GPU (backends/cutecheck.py: what is
        compiled, in a clean process); `problem`, a problem file, also runs ModelNew's forward once on CPU
        inputs of its shapes (`preset`: its KBENCH_PRESETS entry, "" for the full shapes)."""
        require("cutlass", "cute")
        from kbench.backends.cutecheck import check_source

        return check_source(source, arch, str(problem) if problem else "", preset)


def _remember_torch_tensors(cls: Any) -> None:
    """`from_dlpack(t)` keeps only t's DLPack capsule; the tensor itself is kept beside it (`_kbench_torch`)
    so an ablation call can spoil what a compiled function wrote."""
    if getattr(cls.__init__, "_kbench_hooked", False):
        return
    original = cls.__init__

    def init(self: Any, tensor: object, *args: Any, **kwargs: Any) -> None:
        original(self, tensor, *args, **kwargs)
        self._kbench_torch = tensor

    init._kbench_hooked = True  # type: ignore[attr-defined]
    cls.__init__ = init


def _count_calls(cls: Any, recorder: KernelRecorder) -> None:
    """Every call of a compiled function through `recorder.call`, its arguments shown to the recorder as
    the torch tensors behind them (the ablation call spoils those a call wrote)."""
    original = cls.__call__
    if getattr(original, "_kbench_hooked", False):
        return

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self, "function_name", "") or "cute_executor"
        seen = tuple(getattr(a, "_kbench_torch", a) for a in args)
        run = lambda *_a, **_k: original(self, *args, **kwargs)  # noqa: E731
        return recorder.call(name, run, seen, {k: getattr(v, "_kbench_torch", v) for k, v in kwargs.items()})

    call._kbench_hooked = True  # type: ignore[attr-defined]
    cls.__call__ = call
