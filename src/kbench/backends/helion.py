"""`helion`: candidates with `@helion.kernel` functions (PyTorch's Helion, `pip install 'kbench[helion]'`).

Helion lowers each kernel to a Triton kernel named `_helion_<name>` in a module it generates, and launches
it through Triton's launcher, so a Helion candidate runs as a Triton one does (this class extends the
Triton backend): on a machine without a GPU under `TRITON_INTERPRET=1`, each interpreted launch recorded
(its generated kernel's name, argument types, constexprs) and compiled ahead of time for sm_90 in a clean
process (backends/tritoncheck.py finds a kernel defined outside the candidate's file in its own module);
on a GPU the profiler sees the generated kernels by name (`kernel_symbols`). Kernels are never autotuned
inside an evaluation (`HELION_AUTOTUNE_EFFORT=none`): a candidate gives its `helion.Config`, or Helion's
default configuration is used. Helion's generated code and configs go to Inductor's cache, which is the
runner's own (referee/job.py `runner_env`), never a folder another job reads.

Limits of the CPU path: Helion lowers `torch.tanh`, `torch.erf`, `torch.exp` and `torch.rsqrt` to
`libdevice` calls that Triton's interpreter lacks (an `InterpreterError` on the CPU; they compile for sm_90
and run on a GPU), and `torch.amax` to a reduction the interpreter runs element by element (slow, right).
`hl.inline_triton` with `tl.exp` / `tl.max` runs on both (the shipped solutions do so).
"""

from __future__ import annotations

import ast
from typing import Any

from kbench.backends import register_backend
from kbench.backends.triton import TritonBackend
from kbench.errors import require

_DECORATORS = ("helion.kernel", "helion.runtime.kernel.kernel", "helion.runtime.kernel")
PREFIX = "_helion_"  # the generated Triton kernel of a Helion kernel `f` is `_helion_f`


@register_backend("helion")
class HelionBackend(TritonBackend):
    title = "Helion"
    package = "helion"
    code_names = ("helion", "hl", "triton", "tl")
    runner_imports = ("triton.testing", "helion")
    missing_kernel = "no @helion.kernel function"
    detect_rank = 3

    def find_kernels(self, ctx: Any) -> list[str]:
        """Functions decorated with `helion.kernel` (bare or called with its settings)."""

        def helion_decorator(dec: ast.expr) -> bool:
            name = ctx.qualname(dec.func if isinstance(dec, ast.Call) else dec) or ""
            return name in _DECORATORS

        return [
            node.name
            for node in ctx.nodes
            if isinstance(node, ast.FunctionDef) and any(map(helion_decorator, node.decorator_list))
        ]

    def kernel_symbols(self, names: list[str]) -> list[str]:
        """The generated Triton kernels' names, as the profiler and the interpreter's launches show them."""
        return [*names, *(PREFIX + n for n in names if not n.startswith(PREFIX))]

    def check_environment(self, device: str) -> None:
        require("helion", "helion")
        super().check_environment(device)

    def job_env(self, device: str) -> dict[str, str]:
        # No autotuning inside an evaluation. Dots of fp32 at fp32 precision unless the candidate asks for
        # TF32 (`dot_precision="tf32"`, which the precision-downgrade rule reports): Helion's default follows
        # TRITON_F32_DEFAULT, TF32 where it is unset. joblib (imported by Helion's autotuner) would try a
        # process pool the sandbox does not allow, and warn about it on every start.
        return {
            **super().job_env(device),
            "HELION_AUTOTUNE_EFFORT": "none",
            "TRITON_F32_DEFAULT": "ieee",
            "JOBLIB_MULTIPROCESSING": "0",
        }
