"""`triton`: candidates with `@triton.jit` kernels.

On a CPU-only machine the worker runs them under `TRITON_INTERPRET=1` (numpy emulation): results are
real, timings are marked not meaningful. Each interpreted launch is recorded (name, argument types,
constexpr values); afterwards the worker compiles every launched kernel ahead of time for sm_90 with
`triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))`, so a kernel the interpreter
tolerates but the compiler rejects is a `build_error`. The compile runs in a separate process that never
enabled the interpreter (backends/tritoncheck.py says why). Limits: only kernels that actually launched are
compiled, with the specialisations seen in the dry run; launch options (num_warps, num_stages) are not
replayed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbench.backends import Backend, CompileCheck, KernelRecorder, register_backend
from kbench.errors import ConfigError, require

_TYPES = {
    "torch.float32": "fp32",
    "torch.float16": "fp16",
    "torch.bfloat16": "bf16",
    "torch.float64": "fp64",
    "torch.int64": "i64",
    "torch.int32": "i32",
    "torch.int16": "i16",
    "torch.int8": "i8",
    "torch.uint8": "u8",
    "torch.bool": "i1",
}


@dataclass
class Launch:
    fn: Any  # the raw Python function
    signature: dict[str, str] = field(default_factory=dict)
    constexprs: dict[str, Any] = field(default_factory=dict)


def _arg_type(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return "*" + _TYPES.get(str(value.dtype), "fp32")
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    return "constexpr"


def describe_launch(interp: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Launch:
    from triton.runtime.jit import JITFunction

    params = JITFunction(interp.fn).params
    values = dict(zip([p.name for p in params], args, strict=False)) | kwargs
    launch = Launch(fn=interp.fn)
    for p in params:
        if p.name not in values:
            continue  # a default value: the compiler uses it too
        value = values[p.name]
        if p.is_constexpr or _arg_type(value) == "constexpr":
            launch.signature[p.name] = "constexpr"
            launch.constexprs[p.name] = value
        else:
            launch.signature[p.name] = _arg_type(value)
    return launch


def _source(fn: Any, signature: dict[str, str], constexprs: dict[str, Any]) -> Any:
    """`ASTSource` across Triton versions: 3.3+ take `constexprs=` (by name or index tuple), older `constants=`."""
    import inspect

    from triton.compiler import ASTSource

    params = inspect.signature(ASTSource).parameters
    key = "constexprs" if "constexprs" in params else "constants"
    return ASTSource(fn, signature=signature, **{key: constexprs})


def compile_jit(fn: Any, signature: dict[str, str], constexprs: dict[str, Any], arch: str) -> str | None:
    """Compile one JITFunction ahead of time for `arch` (sm_XY); None when it compiles, else the error.

    Needs a process where the interpreter was never enabled (see backends/tritoncheck.py).
    """
    import triton
    from triton.backends.compiler import GPUTarget

    try:
        triton.compile(_source(fn, signature, constexprs), target=GPUTarget("cuda", int(arch[3:]), 32))
    except Exception as exc:  # the compiler's errors are the candidate's failure, reported as data
        return f"{type(exc).__name__}: {exc}"
    return None


_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit.jit")


@register_backend("triton")
class TritonBackend(Backend):
    title = "Triton"
    package = "triton"
    gpu_kernels = True
    prebuilds = False  # kernels are JIT-compiled at first launch, on the GPU host
    cpu_run = "in Triton's interpreter"
    triton_kernels = True
    code_names: tuple[str, ...] = ("triton", "tl")
    runner_imports: tuple[str, ...] = (
        "triton.testing",
    )  # do_bench belongs in the guards' snapshot of the timers
    missing_kernel = "no @triton.jit function"
    detect_rank = 1

    def find_kernels(self, ctx: Any) -> list[str]:
        """Functions decorated with `triton.jit` / `triton.autotune` / `triton.heuristics`."""
        import ast

        def triton_decorator(dec: ast.expr) -> bool:
            name = ctx.qualname(dec.func if isinstance(dec, ast.Call) else dec) or ""
            return any(name == d or name.startswith(d + ".") for d in _DECORATORS)

        return [
            node.name
            for node in ctx.nodes
            if isinstance(node, ast.FunctionDef) and any(map(triton_decorator, node.decorator_list))
        ]

    def check_environment(self, device: str) -> None:
        require("triton", "triton")
        if device.startswith("cuda"):
            from kbench.hardware import gpu_count

            if gpu_count() == 0:
                raise ConfigError(
                    "no CUDA GPU is visible to torch; use --device cpu to run in interpreter mode"
                )

    def job_env(self, device: str) -> dict[str, str]:
        return {} if device.startswith("cuda") else {"TRITON_INTERPRET": "1"}

    def install_hooks(self, recorder: KernelRecorder, cache_dir: Path, request: Any = None) -> None:
        super().install_hooks(recorder, cache_dir, request)
        import os

        if os.environ.get("TRITON_INTERPRET") != "1":
            # trusted and CPU-only: here, before the lease, not at the first launch; stored by the host
            prewarm_cache_key(cache_dir)
            _ablatable_launches(recorder)  # on a GPU the profiler sees Triton kernels by name
            return
        from triton.runtime.interpreter import InterpretedFunction

        original = InterpretedFunction.run
        launches: dict[str, Launch] = {}
        recorder.extra["triton_launches"] = launches

        def run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
            name = self.fn.__name__
            if name not in launches:
                launches[name] = describe_launch(self, args, kwargs)
            launch = lambda *a, **k: original(self, *a, grid=grid, warmup=warmup, **k)  # noqa: E731
            return recorder.call(name, launch, args, kwargs)  # counted once it returns, like the cpp wrapper

        InterpretedFunction.run = run  # type: ignore[method-assign]

    def compile_check(self, source: str, arch: str = "sm_90") -> CompileCheck:
        raise ConfigError(
            "Triton kernels are compile-checked from a dry run: `kbench eval --backend triton --device cpu` "
            "compiles every launched kernel for sm_90"
        )


def _ablatable_launches(recorder: KernelRecorder) -> None:
    """Compiled launches through the recorder only in an ablation call (`KernelRecorder.call`): every other
    launch runs as Triton runs it, its overhead untouched."""
    from triton.runtime.jit import JITFunction

    original = JITFunction.run

    def run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        if not recorder.ablate or warmup:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        launch = lambda *a, **k: original(self, *a, grid=grid, warmup=warmup, **k)  # noqa: E731
        return recorder.call(self.fn.__name__, launch, args, kwargs)

    JITFunction.run = run  # type: ignore[method-assign]


def prewarm_cache_key(cache_dir: Path | str | None = None) -> None:
    """Have Triton's own cache key ready now: a digest of its sources and its compiled library that Triton
    takes, once per process, at the first kernel compile or cache lookup (0.4 s on an H200 host, 1 s on a
    slow core). With `cache_dir`, the value stored there for the installed Triton is taken instead of
    hashing (backends/tritonkey.py), where the host stored one. A worker calls this in its set-up, before
    it waits for the GPU lease, so a fresh process's first launch, under the lease, only looks its kernel
    up; the warm starter calls it after preloading Triton, so every worker it forks inherits the key.
    Silent where Triton is absent or keeps the key elsewhere (the first launch then computes it, as
    before)."""
    try:
        from triton.runtime import cache
    except ImportError:
        return
    key = getattr(cache, "triton_key", None)
    if not callable(key):
        return
    if cache_dir:  # a job names one (an empty name: none)
        from kbench.backends import tritonkey

        stored = tritonkey.known(tritonkey.key_file(cache_dir))
        if stored is not None:
            tritonkey.install(stored)
            return
    key()
