"""Snapshots of process state that a candidate must not change (worker side, taken before its import).

- global state (rule `global-state`): TF32 and reduced-precision switches, cuDNN flags, float32 matmul
  precision, default dtype, deterministic algorithms, thread count, grad mode;
- timing functions (rule `timer-patched`): identities of the clocks, CUDA events/streams/synchronize and
  `triton.testing.do_bench`;
- the reference (rule `reference-patched`): identities of every public callable in `torch`,
  `torch.nn.functional`, `torch.Tensor` (and its C base), and of each `torch.nn` module class and its
  `forward` — a candidate that replaces `torch.relu` would otherwise make the reference agree with it.

Only names present in the snapshot are compared: new attributes (lazy submodules) are not changes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch

Snapshot = dict[str, Any]


def global_state() -> Snapshot:
    cuda_matmul = torch.backends.cuda.matmul
    return {
        "cuda.matmul.allow_tf32": cuda_matmul.allow_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction": cuda_matmul.allow_fp16_reduced_precision_reduction,
        "cuda.matmul.allow_bf16_reduced_precision_reduction": cuda_matmul.allow_bf16_reduced_precision_reduction,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn.enabled": torch.backends.cudnn.enabled,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "default_dtype": str(torch.get_default_dtype()),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "num_threads": torch.get_num_threads(),
        "grad_enabled": torch.is_grad_enabled(),
    }


def _timer_objects() -> dict[str, Any]:
    objs: dict[str, Any] = {
        f"time.{n}": getattr(time, n) for n in ("perf_counter", "perf_counter_ns", "time")
    }
    objs["time.monotonic"] = time.monotonic
    objs["torch.cuda.Event"] = torch.cuda.Event
    for name in ("elapsed_time", "record", "synchronize"):
        objs[f"torch.cuda.Event.{name}"] = getattr(torch.cuda.Event, name)
    objs["torch.cuda.synchronize"] = torch.cuda.synchronize
    objs["torch.cuda.Stream"] = torch.cuda.Stream
    import sys

    testing = sys.modules.get("triton.testing")
    if testing is not None:
        objs["triton.testing.do_bench"] = testing.do_bench
    return objs


def timers() -> Snapshot:
    return {k: id(v) for k, v in _timer_objects().items()}


def _public_callables(prefix: str, namespace: Mapping[str, Any]) -> dict[str, int]:
    return {
        f"{prefix}.{k}": id(v) for k, v in list(namespace.items()) if not k.startswith("__") and callable(v)
    }


def reference() -> Snapshot:
    snap: dict[str, int] = {}
    snap.update(_public_callables("torch", vars(torch)))
    snap.update(_public_callables("torch.nn.functional", vars(torch.nn.functional)))
    snap.update(_public_callables("torch.Tensor", vars(torch.Tensor)))
    snap.update(_public_callables("torch._C.TensorBase", vars(torch._C.TensorBase)))
    for name, cls in list(vars(torch.nn).items()):
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            snap[f"torch.nn.{name}"] = id(cls)
            snap[f"torch.nn.{name}.forward"] = id(vars(cls).get("forward"))
    return snap


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_NAMESPACES = (
    ("torch.nn.functional.", lambda: vars(torch.nn.functional)),
    ("torch.Tensor.", lambda: vars(torch.Tensor)),
    ("torch._C.TensorBase.", lambda: vars(torch._C.TensorBase)),
    ("torch.", lambda: vars(torch)),
)


def _torch_wrapper(name: str, original_id: int) -> bool:
    """True when `name` now holds a wrapper that torch itself made around the snapshotted object.

    Importing torch._dynamo (torch.compile, or a candidate's own import) replaces torch.manual_seed
    by `torch._disable_dynamo(manual_seed)`: same function underneath (`__wrapped__`), code in torch's
    package. No worker imports torch._dynamo up front any more (2-4.5 s), so this is tolerated.
    """
    for prefix, namespace in _NAMESPACES:
        if name.startswith(prefix):
            obj = namespace().get(name[len(prefix) :])
            inner = getattr(obj, "__wrapped__", None)
            code = getattr(obj, "__code__", None)
            return (
                inner is not None
                and id(inner) == original_id
                and code is not None
                and code.co_filename.startswith(_TORCH_DIR)
            )
    return False


def changed(before: Snapshot, after: Snapshot) -> list[str]:
    """Names whose value differs (or vanished); names added since `before` are ignored."""
    return [k for k, v in before.items() if after.get(k, object()) != v]


class Guards:
    """All three snapshots, taken at construction; `violation()` names the first rule that fires."""

    CHECKS: tuple[tuple[str, Callable[[], Snapshot]], ...] = (
        ("global-state", global_state),
        ("timer-patched", timers),
        ("reference-patched", reference),
    )

    def __init__(self) -> None:
        self.before = {rule: take() for rule, take in self.CHECKS}

    def violation(self, when: str) -> tuple[str, str] | None:
        for rule, take in self.CHECKS:
            diff = changed(self.before[rule], take())
            if rule == "reference-patched":
                diff = [k for k in diff if not _torch_wrapper(k, self.before[rule][k])]
            if diff:
                shown = ", ".join(diff[:5]) + (f" (+{len(diff) - 5} more)" if len(diff) > 5 else "")
                return rule, f"{when} changed {shown}"
        return None
