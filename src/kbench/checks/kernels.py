"""Names of the kernels a candidate's own source defines, by its backend (read from text, never imported).

The evaluator matches these against the profiler's kernel list to prove that the candidate's own code
ran during forward (rule `no-custom-kernel`); the static rule `no-kernel` fires when the list is empty.
Each backend finds its own (`Backend.find_kernels`: CUDA's `__global__` functions, Triton's `@triton.jit`
functions, C++ functions exported by load_inline).
"""

from __future__ import annotations

from kbench.backends import backends, get_backend
from kbench.checks.context import CheckContext


def names_in(ctx: CheckContext) -> tuple[str, ...]:
    return tuple(dict.fromkeys(get_backend(ctx.backend).find_kernels(ctx)))  # ordered, deduplicated


def backend_of(ctx: CheckContext) -> str | None:
    """The backend whose kernels `ctx`'s source defines, when that is not its declared backend: the
    backends are tried in their `detect_rank` order (CUDA before C++: a CUDA candidate exports its launcher
    through load_inline too). None when it defines none, or defines kernels of its own backend."""
    if names_in(ctx):
        return None
    for other in backends():
        if other.name != ctx.backend and other.find_kernels(ctx):
            return other.name
    return None


def kernel_names(source: str, backend: str) -> tuple[str, ...]:
    """Kernel names `source` defines for `backend`, in order of appearance; () on a syntax error."""
    try:
        ctx = CheckContext.parse(source, backend, "fp32")
    except SyntaxError:
        return ()
    return names_in(ctx)
