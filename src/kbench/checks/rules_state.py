"""Rules against tampering with the process: patching torch or timers, global switches, threads, streams,
tensor subclasses and introspection of foreign objects."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from kbench.checks.context import CheckContext, matches
from kbench.checks.registry import Hit, register_rule
from kbench.types import Severity

# Modules whose attributes a candidate must never assign: torch (the reference's ops), the timers.
_PATCHABLE = ("torch", "time", "triton", "numpy", "timeit")
_GLOBAL_SWITCH_ATTRS = ("torch.backends",)
_GLOBAL_SWITCH_CALLS = (
    "torch.set_float32_matmul_precision",
    "torch.set_default_dtype",
    "torch.set_default_tensor_type",
    "torch.set_default_device",
    "torch.use_deterministic_algorithms",
    "torch.set_deterministic_debug_mode",
    "torch.set_num_threads",
    "torch.set_num_interop_threads",
    "torch.set_flush_denormal",
    "torch._C._set_cudnn_enabled",
    "torch._C._set_cublas_allow_tf32",
    "torch.backends.cuda.preferred_linalg_library",
)


def _flatten_targets(targets: list[ast.expr]) -> list[ast.expr]:
    """`torch.a, (time.b, c) = ...` -> [torch.a, time.b, c]; an attribute's own base is not a target."""
    flat: list[ast.expr] = []
    for t in targets:
        if isinstance(t, ast.Tuple | ast.List):
            flat.extend(_flatten_targets(list(t.elts)))
        elif isinstance(t, ast.Starred):
            flat.extend(_flatten_targets([t.value]))
        else:
            flat.append(t)
    return flat


def _assigned_attributes(ctx: CheckContext) -> Iterator[tuple[str, int]]:
    """Dotted names of attribute targets of assignment, augmented assignment, del and setattr(...)."""
    for node in ctx.nodes:
        if not isinstance(node, ast.stmt | ast.expr):
            continue
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for t in _flatten_targets(targets):
            if isinstance(t, ast.Attribute) and (name := ctx.qualname(t)):
                yield name, node.lineno
        if isinstance(node, ast.Call) and ctx.call_name(node) in ("setattr", "delattr", "builtins.setattr"):
            if node.args and (base := ctx.qualname(node.args[0])):
                second = node.args[1] if len(node.args) > 1 else None
                attr = str(second.value) if isinstance(second, ast.Constant) else "?"
                yield f"{base}.{attr}", node.lineno


@register_rule("torch-attr-assign")
def torch_attr_assign(ctx: CheckContext) -> Iterator[Hit]:
    """Assigning to attributes of torch, time or triton replaces functions the reference or the timer
    uses (e.g. `torch.nn.functional.gelu = fast_wrong_gelu`, `time.perf_counter = lambda: 0`), so the
    comparison or the measured time is no longer the real one. torch.backends flags are `global-switch`."""
    for name, line in _assigned_attributes(ctx):
        if matches(name, _PATCHABLE) and not matches(name, _GLOBAL_SWITCH_ATTRS):
            yield Hit(line, f"assigns {name} (monkeypatching a torch/timing attribute)")


@register_rule("global-switch")
def global_switch(ctx: CheckContext) -> Iterator[Hit]:
    """Flipping process-wide numerics (TF32 on, cuDNN off or benchmark, matmul precision, default dtype,
    thread count) changes how the reference or the timing runs, and can buy speed with precision that
    the problem did not allow. The evaluator also compares the state at runtime (`global-state`)."""
    for target, line in _assigned_attributes(ctx):
        if matches(target, _GLOBAL_SWITCH_ATTRS):
            yield Hit(line, f"sets {target} (a torch.backends global switch)")
    for call in ctx.calls:
        name = ctx.call_name(call)
        if matches(name, _GLOBAL_SWITCH_CALLS):
            yield Hit(call.lineno, f"calls {name} (changes torch global state)")
    for stmt in ctx.nodes:
        # `torch.set_grad_enabled(False)` as a statement flips grad mode for the whole process;
        # `with torch.set_grad_enabled(False):` is scoped and fine.
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            if ctx.call_name(stmt.value) == "torch.set_grad_enabled":
                yield Hit(stmt.lineno, "calls torch.set_grad_enabled outside a with-block (global grad mode)")


_PROCESS_MODULES = (
    "threading",
    "_thread",
    "multiprocessing",
    "subprocess",
    "concurrent",
    "pty",
    "torch.multiprocessing",
)
_PROCESS_CALLS = (
    "os.fork",
    "os.forkpty",
    "os.system",
    "os.popen",
    "os.posix_spawn",
    "os.posix_spawnp",
    "os.kill",
    "os.killpg",
    "signal.signal",
    "signal.alarm",
    "signal.setitimer",
    "atexit.register",
)
_PROCESS_PREFIXES = ("os.spawn", "os.exec")
_C_PROCESS = re.compile(r"\b(fork|vfork|system|popen|pthread_create|execv\w*|posix_spawn\w*)\s*\(")
_C_THREAD = re.compile(r"std::(thread|async|jthread)\b")


@register_rule("threads-processes")
def threads_processes(ctx: CheckContext) -> Iterator[Hit]:
    """A background thread or process can finish the work after the timer stops, compute results out of
    band, outlive the worker, or signal the harness. Kernels get their parallelism from the GPU or from
    OpenMP (`#pragma omp`), never from Python threads or child processes."""
    for mod, line in ctx.imported_modules:
        if matches(mod, _PROCESS_MODULES):
            yield Hit(line, f"imports {mod} (threads/processes)")
    for call in ctx.calls:
        name = ctx.call_name(call) or ""
        if matches(name, _PROCESS_CALLS) or any(name.startswith(p) for p in _PROCESS_PREFIXES):
            yield Hit(call.lineno, f"calls {name} (processes/signals)")
    for cs in ctx.code_strings:
        if m := _C_PROCESS.search(cs.text):
            yield Hit(cs.line, f"C/C++ source calls {m.group(0).strip()} (background process/thread)")
        elif (m := _C_THREAD.search(cs.text)) and ".detach(" in cs.text:
            # A detached thread outlives the call: the work can end after the timer stops.
            yield Hit(cs.line, f"C/C++ source detaches a {m.group(0)} (work outlives the call)")
        elif m:
            yield Hit(
                cs.line, f"C/C++ source uses {m.group(0)}: use OpenMP for CPU parallelism", Severity.WARN
            )


_STREAM_CALLS = (
    "torch.cuda.Stream",
    "torch.cuda.stream",
    "torch.cuda.ExternalStream",
    "torch.Stream",
    "torch.cuda.set_stream",
)
_SAFE_STREAM_VALUES = ("torch.cuda.current_stream", "torch.cuda.default_stream")
_C_STREAM = re.compile(r"\b(cudaStreamCreate\w*|getStreamFromPool|cudaStreamNonBlocking|cuStreamCreate\w*)\b")


@register_rule("streams", Severity.WARN)
def streams(ctx: CheckContext) -> Iterator[Hit]:
    """Work launched on a side stream is not covered by events recorded on the current stream, so a timer
    can stop before the kernel ends. Warn only: the evaluator synchronizes the whole device and checks
    the wall clock, and side streams have honest uses; the current stream is always fine."""
    for call in ctx.calls:
        name = ctx.call_name(call)
        if matches(name, _STREAM_CALLS):
            yield Hit(call.lineno, f"calls {name} (non-default CUDA stream)")
        for kw in call.keywords:
            if kw.arg == "stream" and not _safe_stream(ctx, kw.value):
                yield Hit(call.lineno, "passes stream= (a non-current stream?)")
    for cs in ctx.code_strings:
        if m := _C_STREAM.search(cs.text):
            yield Hit(cs.line, f"C/C++ source uses {m.group(1)} (side stream)")


def _safe_stream(ctx: CheckContext, value: ast.expr) -> bool:
    if isinstance(value, ast.Constant) and value.value in (None, 0):
        return True
    return isinstance(value, ast.Call) and matches(ctx.call_name(value), _SAFE_STREAM_VALUES)


_TENSOR_TYPES = ("torch.Tensor", "torch._tensor.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter")
_SUBCLASS_HOOKS = ("__torch_function__", "__torch_dispatch__")
_SUBCLASS_CALLS = (
    "torch.Tensor._make_subclass",
    "torch.Tensor._make_wrapper_subclass",
    "torch.overrides",
    "torch.utils._python_dispatch",
    "torch._C._set_torch_function_mode",
)


@register_rule("tensor-subclass")
def tensor_subclass(ctx: CheckContext) -> Iterator[Hit]:
    """A torch.Tensor subclass (or a __torch_function__/__torch_dispatch__ hook) can defer the work until
    the output is compared, or answer the comparison itself, so the timed forward did nothing."""
    for node in ctx.nodes:
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if matches(ctx.qualname(base), _TENSOR_TYPES):
                    yield Hit(node.lineno, f"class {node.name} subclasses {ctx.qualname(base)}")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in _SUBCLASS_HOOKS:
            yield Hit(node.lineno, f"defines {node.name} (intercepts torch operations)")
    for mod, line in ctx.imported_modules:
        if matches(mod, _SUBCLASS_CALLS):
            yield Hit(line, f"imports {mod} (torch function/dispatch modes)")
    for call in ctx.calls:
        if matches(ctx.call_name(call), _SUBCLASS_CALLS):
            yield Hit(call.lineno, f"calls {ctx.call_name(call)} (tensor subclass machinery)")


_INTROSPECTION_MODULES = ("gc", "inspect", "ctypes", "_ctypes", "builtins", "__builtin__")
_INTROSPECTION_NAMES = (
    "sys._getframe",
    "sys.settrace",
    "sys.setprofile",
    "sys.modules",
    "sys._current_frames",
    "sys.audit",
    "sys.addaudithook",
)
_DYNAMIC_BUILTINS = {"globals", "vars", "eval", "exec", "compile"}


@register_rule("introspection")
def introspection(ctx: CheckContext) -> Iterator[Hit]:
    """gc, inspect, frames, ctypes and builtins let a candidate find objects it was never given (the
    reference's expected output on the heap, the harness's tensors) or rewrite the interpreter's rules.
    A kernel needs none of them. Frame and code attributes by any route are `frame-access`."""
    for mod, line in ctx.imported_modules:
        if matches(mod, _INTROSPECTION_MODULES):
            yield Hit(line, f"imports {mod} (introspection of foreign objects)")
    for node in ctx.nodes:
        if isinstance(node, ast.Attribute):
            if matches(ctx.qualname(node), _INTROSPECTION_NAMES):
                yield Hit(node.lineno, f"uses {ctx.qualname(node)}")
        elif isinstance(node, ast.Name) and node.id in ("__builtins__", "__import__"):
            yield Hit(node.lineno, f"uses {node.id}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _DYNAMIC_BUILTINS
        ):
            if node.func.id not in ctx.aliases:
                yield Hit(node.lineno, f"calls {node.func.id}() (dynamic code or foreign namespaces)")
