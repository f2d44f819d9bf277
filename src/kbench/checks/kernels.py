"""Names of the kernels a candidate's own source defines, per backend (read from text, never imported).

The evaluator matches these against the profiler's kernel list to prove that the candidate's own code
ran during forward (rule `no-custom-kernel`); the static rule `no-kernel` fires when the list is empty.
- cuda: `__global__` function names in string literals (the load_inline `cuda_sources`);
- triton: functions decorated with `triton.jit` / `triton.autotune` / `triton.heuristics`;
- cpp: functions exported by `load_inline(functions=[...])` and `m.def("name", ...)` in PYBIND11 blocks.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from kbench.checks.context import CheckContext, matches

_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_GLOBAL = re.compile(r"__global__\b([^;{(]*)\(")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_PYBIND_DEF = re.compile(r"\.def\(\s*\"([A-Za-z_]\w*)\"")
_TRITON_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit.jit")
_LOAD_INLINE = ("torch.utils.cpp_extension.load_inline",)


def _cuda_names(ctx: CheckContext) -> list[str]:
    names: list[str] = []
    for cs in ctx.code_strings:
        text = _LAUNCH_BOUNDS.sub(" ", cs.text)
        for m in _GLOBAL.finditer(text):
            # `__global__ void __launch_bounds__(256) k(` -> the last identifier before `(` is the name.
            idents = _IDENT.findall(m.group(1))
            if idents:
                names.append(idents[-1])
    return names


def _decorator_name(ctx: CheckContext, dec: ast.expr) -> str | None:
    return ctx.qualname(dec.func if isinstance(dec, ast.Call) else dec)


def _triton_names(ctx: CheckContext) -> list[str]:
    names = []
    for node in ctx.nodes:
        if isinstance(node, ast.FunctionDef) and any(
            matches(_decorator_name(ctx, d), _TRITON_DECORATORS) for d in node.decorator_list
        ):
            names.append(node.name)
    return names


def load_inline_calls(ctx: CheckContext) -> list[ast.Call]:
    return [c for c in ctx.calls if matches(ctx.call_name(c), _LOAD_INLINE) or _is_bare_load_inline(ctx, c)]


def _is_bare_load_inline(ctx: CheckContext, call: ast.Call) -> bool:
    # `cpp_extension.load_inline(...)` after `from torch.utils import cpp_extension` resolves fully;
    # this catches only a name that no import defined (a candidate that forgot the import).
    return (
        isinstance(call.func, ast.Name) and call.func.id == "load_inline" and "load_inline" not in ctx.aliases
    )


def _cpp_names(ctx: CheckContext) -> list[str]:
    names: list[str] = []
    for call in load_inline_calls(ctx):
        for kw in call.keywords:
            if kw.arg == "functions":
                names.extend(ctx.module_list_value(kw.value))
    for cs in ctx.code_strings:
        if "PYBIND11_MODULE" in cs.text:
            names.extend(_PYBIND_DEF.findall(cs.text))
    return names


_BY_BACKEND: dict[str, Callable[[CheckContext], list[str]]] = {
    "cuda": _cuda_names,
    "triton": _triton_names,
    "cpp": _cpp_names,
}


def names_in(ctx: CheckContext) -> tuple[str, ...]:
    finder = _BY_BACKEND.get(ctx.backend)
    if finder is None:
        return ()
    return tuple(dict.fromkeys(finder(ctx)))  # ordered, deduplicated


def backend_of(ctx: CheckContext) -> str | None:
    """The backend whose kernels `ctx`'s source defines, when that is not its declared backend: a CUDA
    `__global__` kernel first (a CUDA candidate exports its launcher through load_inline too, so it would
    also pass for cpp), then an `@triton.jit` function, then an exported C++ function. None when it
    defines none, or defines kernels of its own backend."""
    if names_in(ctx):
        return None
    for other in _BY_BACKEND:
        if other != ctx.backend and _BY_BACKEND[other](ctx):
            return other
    return None


def kernel_names(source: str, backend: str) -> tuple[str, ...]:
    """Kernel names `source` defines for `backend`, in order of appearance; () on a syntax error."""
    try:
        ctx = CheckContext.parse(source, backend, "fp32")
    except SyntaxError:
        return ()
    return names_in(ctx)
