"""Rules that the candidate's own kernel does the work: no PyTorch fallback, no call into the reference,
a kernel defined for the declared backend, and no silent precision downgrade."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from kbench.backends import get_backend, kernel_code_names
from kbench.checks.context import CheckContext, matches
from kbench.checks.kernels import backend_of, names_in
from kbench.checks.registry import Hit, register_rule
from kbench.types import Severity

_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}
# torch names that do no tensor math: calling them in an except handler is not a fallback.
_TORCH_NON_COMPUTE = (
    "torch.cuda",
    "torch.utils.cpp_extension",
    "torch.device",
    "torch.Size",
    "torch.dtype",
    "torch.finfo",
    "torch.iinfo",
    "torch.is_tensor",
    "torch.get_default_dtype",
    "torch.version",
    "torch.__version__",
)
# Tensor methods that compute a result (x.relu(), x @ w via x.matmul(w), ...).
_TENSOR_OPS = {
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "relu",
    "relu_",
    "gelu",
    "silu",
    "tanh",
    "sigmoid",
    "softmax",
    "log_softmax",
    "clamp",
    "clamp_min",
    "clamp_max",
    "exp",
    "log",
    "sum",
    "mean",
    "add",
    "add_",
    "mul",
    "mul_",
    "sub",
    "div",
    "pow",
    "sqrt",
    "rsqrt",
    "erf",
    "max",
    "min",
    "norm",
    "layer_norm",
    "batch_norm",
    "group_norm",
    "dropout",
    "hardtanh",
    "leaky_relu",
    "elu",
    "mish",
    "softplus",
}


def _handler_catches_import_only(handler: ast.ExceptHandler) -> bool:
    t = handler.type
    names = t.elts if isinstance(t, ast.Tuple) else [t] if t is not None else []
    return bool(names) and all(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names)


def _torch_modules_of_self(ctx: CheckContext) -> set[str]:
    """Attributes `self.X = nn.Something(...)`: calling `self.X(x)` runs a PyTorch module."""
    found = set()
    for node in ctx.nodes:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if matches(ctx.call_name(node.value), ("torch.nn",)):
                for t in node.targets:
                    if (
                        isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name)
                        and t.value.id == "self"
                    ):
                        found.add(t.attr)
    return found


def _pytorch_compute(ctx: CheckContext, call: ast.Call, modules: set[str]) -> str | None:
    """Describe `call` when it makes PyTorch (not the candidate's kernel) compute a result."""
    name = ctx.call_name(call)
    if matches(name, ("torch",)) and not matches(name, _TORCH_NON_COMPUTE):
        return name
    func = call.func
    if isinstance(func, ast.Attribute):
        if func.attr in _TENSOR_OPS and not matches(name, kernel_code_names()):
            return f".{func.attr}()"
        if (
            func.attr == "forward"
            and isinstance(func.value, ast.Call)
            and ctx.call_name(func.value) == "super"
        ):
            return "super().forward()"
        if isinstance(func.value, ast.Name) and func.value.id == "self" and func.attr in modules:
            return f"self.{func.attr}() (a torch.nn module)"
    if isinstance(func, ast.Name) and func.id == "Model":
        return "Model() (the reference)"
    return None


@register_rule("try-fallback")
def try_fallback(ctx: CheckContext) -> Iterator[Hit]:
    """A try/except whose handler computes the answer with PyTorch turns a failing or unbuildable kernel
    into a silently 'correct' candidate timed as PyTorch. `try: import triton / except ImportError` and
    handlers that re-raise or only report are fine."""
    modules = _torch_modules_of_self(ctx)
    for node in ctx.nodes:
        if not isinstance(node, ast.Try | ast.TryStar):
            continue
        if all(_handler_catches_import_only(h) for h in node.handlers):
            continue
        if not any(isinstance(n, ast.Call) for stmt in node.body for n in ast.walk(stmt)):
            continue
        for handler in node.handlers:
            for sub in (n for stmt in handler.body for n in ast.walk(stmt)):
                if isinstance(sub, ast.Call) and (what := _pytorch_compute(ctx, sub, modules)):
                    yield Hit(handler.lineno, f"except handler falls back to PyTorch ({what})")
                    break


@register_rule("no-kernel")
def no_kernel(ctx: CheckContext) -> Iterator[Hit]:
    """A candidate for a backend must define a kernel in that backend (`Backend.find_kernels`: a
    `__global__` function in its CUDA sources, an `@triton.jit` function, a C++ function exported by
    load_inline); otherwise the work is
    done by PyTorch and the benchmark measures PyTorch against itself. When the source holds another
    backend's kernels, the message says which backend to pass instead."""
    if not names_in(ctx):
        hint = ""
        if other := backend_of(ctx):
            hint = f"; this looks like a {get_backend(other).title} candidate: pass --backend {other}"
        yield Hit(1, f"backend {ctx.backend}: {get_backend(ctx.backend).missing_kernel}{hint}")


@register_rule("reference-call")
def reference_call(ctx: CheckContext) -> Iterator[Hit]:
    """ModelNew must not subclass, instantiate or call `Model` (the reference): inheriting its forward or
    delegating to it makes PyTorch do the work. Defining an unused copy of Model is fine."""
    for node in ctx.nodes:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            for base in node.bases:
                if (ctx.qualname(base) or "").split(".")[-1] == "Model":
                    yield Hit(node.lineno, "ModelNew subclasses Model (inherits the reference)")
        elif isinstance(node, ast.Name) and node.id == "Model" and isinstance(node.ctx, ast.Load):
            if not _is_modelnew_base(ctx, node):
                yield Hit(node.lineno, "uses Model (the reference) inside the candidate")
        elif isinstance(node, ast.Attribute) and node.attr == "Model":
            if not matches(ctx.qualname(node.value), ("torch",)):
                yield Hit(node.lineno, f"uses {ctx.qualname(node) or '<expr>.Model'} (the reference)")


def _is_modelnew_base(ctx: CheckContext, name: ast.Name) -> bool:
    # Reported once, by the ClassDef branch above.
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" and name in n.bases for n in ctx.nodes)


_LOW_DTYPES = (
    "torch.float16",
    "torch.half",
    "torch.bfloat16",
    "triton.language.float16",
    "triton.language.bfloat16",
    "triton.language.float8e4nv",
    "triton.language.float8e5",
)
_AUTOCAST = ("torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast")
_C_LOW_PRECISION = re.compile(
    r"\b(__half2?|half2|__nv_bfloat16\w*|__float2half\w*|__float2bfloat16\w*|at::kHalf|at::kBFloat16|"
    r"torch::kFloat16|torch::kHalf|torch::kBFloat16|c10::Half|c10::BFloat16|wmma::|__float_to_tf32|"
    r"nvcuda::wmma::precision::tf32)\b|\.tf32\b"
)


@register_rule("precision-downgrade", Severity.WARN)
def precision_downgrade(ctx: CheckContext) -> Iterator[Hit]:
    """On an fp32 problem, computing in fp16/bf16/TF32 buys speed with precision the problem did not
    allow. Warn only: the correctness tolerance decides, and a careful mixed-precision kernel can pass.
    Triton's tl.dot on fp32 defaults to TF32 on GPUs and is not flagged unless requested explicitly."""
    if ctx.dtype != "fp32":
        return
    for node in ctx.nodes:
        if isinstance(node, ast.Attribute) and matches(ctx.qualname(node), _LOW_DTYPES):
            yield Hit(node.lineno, f"uses {ctx.qualname(node)} on an fp32 problem")
        elif isinstance(node, ast.Call):
            name = ctx.call_name(node)
            if (
                isinstance(node.func, ast.Attribute)
                and node.func.attr in ("half", "bfloat16")
                and not node.args
            ):
                yield Hit(node.lineno, f"casts with .{node.func.attr}() on an fp32 problem")
            elif matches(name, _AUTOCAST):
                yield Hit(node.lineno, f"uses {name} on an fp32 problem")
            yield from _tf32_keywords(node)
    for cs in ctx.code_strings:
        if m := _C_LOW_PRECISION.search(cs.text):
            yield Hit(cs.line, f"C/C++/CUDA source uses {m.group(0)} on an fp32 problem")
    for line, what in get_backend(ctx.backend).low_precision(ctx):
        yield Hit(line, f"uses {what} on an fp32 problem")


def _tf32_keywords(call: ast.Call) -> Iterator[Hit]:
    for kw in call.keywords:
        value = kw.value.value if isinstance(kw.value, ast.Constant) else None
        if (kw.arg == "allow_tf32" and value is True) or (
            kw.arg in ("input_precision", "dot_precision") and value == "tf32"  # Triton's, Helion's
        ):  # "tf32x3" splits each operand in three TF32 parts: fp32-level accuracy, not a downgrade
            yield Hit(call.lineno, f"requests TF32 ({kw.arg}={value!r}) on an fp32 problem")
