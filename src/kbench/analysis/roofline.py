"""Roofline and speed-of-light (SOL): the fastest a problem could possibly run on a GPU.

FLOPs: matmul/conv/attention through torch.utils.flop_counter (2 FLOPs per multiply-add), plus one FLOP per
output element of every other computing operator (elementwise, reductions, norms): that term is a formula,
not a measurement, and never dominates a problem that has a matmul. Bytes: the minimum any kernel must move
-- every input, parameter and buffer read once, every output written once.

SOL time = max(compute time, memory time), compute time = matmul FLOPs at the tensor rate for the dtype
(fp32 uses the non-tensor rate unless TF32 is on) + other FLOPs at the fp32 CUDA-core rate.

SOL is the reference point of "fraction of SOL"; it is not a bound no honest kernel can pass: a kernel may
skip inputs and work whose results are masked out (a causal softmax need not read the upper triangle; a
causal attention kernel skips half its matmul FLOPs). The evaluator's `beyond-speed-of-light` rule
therefore compares against `floor_ms`: the larger of writing every output byte once at peak bandwidth
(outputs are new tensors: every byte must be written) and half the compute time.

The counting runs on the meta device, so the `full` preset costs nothing on a CPU-only machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kbench.analysis.gpus import GPUSpec
from kbench.files import write_atomic
from kbench.problems.lint import flat_tensors
from kbench.problems.loader import build_model, load
from kbench.types import Problem

TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
# Operators that move or allocate data but compute nothing.
_NO_FLOP_OPS = {
    "clone", "copy_", "_to_copy", "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "fill_", "cat", "stack", "contiguous", "detach", "lift_fresh",
    "index_select", "gather", "embedding", "constant_pad_nd", "reflection_pad2d", "scalar_tensor",
    "randn", "rand", "randint", "arange", "new_empty", "new_zeros", "new_ones", "_unsafe_view",
}  # fmt: skip


@dataclass(frozen=True)
class FlopCount:
    matmul_flops: int  # matmul, conv, attention (tensor-core work)
    other_flops: int  # elementwise/reduction estimate: 1 FLOP per output element
    bytes: int  # minimum bytes moved
    by_op: tuple[tuple[str, int], ...] = ()
    output_bytes: int = 0  # of the forward's outputs alone

    @property
    def flops(self) -> int:
        return self.matmul_flops + self.other_flops


@dataclass(frozen=True)
class SOL:
    flops: int
    bytes: int
    intensity: float  # FLOPs per byte
    sol_ms: float
    bound: str  # compute | memory
    compute_ms: float = 0.0
    memory_ms: float = 0.0
    gpu: str = ""
    dtype: str = "fp32"
    tf32: bool = False
    floor_ms: float = 0.0  # what no honest kernel can beat (module doc): the cheat rule's bound


def _sdpa_cpu_flops(args: tuple[Any, ...]) -> int:
    """The CPU flash-attention kernel has no flop_counter entry: QK^T and PV, 2 FLOPs per multiply-add."""
    q, k, v = args[:3]
    *batch, length, head_dim = q.shape
    batch_size = 1
    for b in batch:
        batch_size *= b
    return 2 * batch_size * length * k.shape[-2] * (head_dim + v.shape[-1])


def _counting_mode() -> Any:
    return _other_ops_class()()


@lru_cache(maxsize=1)
def _other_ops_class() -> Any:
    """The dispatch mode that counts what flop_counter does not (one class, made on first use)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class OtherOps(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.other: dict[str, int] = {}
            self.extra_matmul = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__
            if name == "_scaled_dot_product_flash_attention_for_cpu":
                self.extra_matmul += _sdpa_cpu_flops(args)
            elif func.overloadpacket not in flop_registry and not func.is_view and name not in _NO_FLOP_OPS:
                n = sum(t.numel() for t in flat_tensors(out))
                if n:
                    self.other[name] = self.other.get(name, 0) + n
            return out

    return OtherOps


_DISABLE_CACHE = "__dynamo_disable"  # where torch._disable_dynamo keeps a function's dynamo-disabled twin
_seeding = threading.Lock()
_seeded: list[Any] = []  # the functions handed their own twin, while `_counts_running` > 0
_counts_running = 0


@contextlib.contextmanager
def _without_dynamo_import() -> Iterator[None]:
    """torch's `_disable_dynamo` wrappers call the functions they wrap as they are, for the duration.

    torch wraps each dispatch mode's `__torch_dispatch__` and a few hundred of its own functions (meta
    kernels and decompositions a meta-device trace runs) in `torch._disable_dynamo`, which imports
    torch._dynamo on a wrapper's first call (1.5 s on a quiet CPU core, several seconds on a GPU host,
    holding the GIL) only so that a dynamo trace never enters the function. A count is an eager trace that
    no dynamo trace runs through, so until dynamo is imported anyway, each wrapper found is handed its own
    function as the disabled twin it would otherwise build there, until the last count running ends.
    Wrappers are found by their code object; where torch has none of this shape, nothing changes (the
    first count then imports dynamo)."""
    global _counts_running
    with _seeding:
        _counts_running += 1
        if _counts_running == 1 and "torch._dynamo" not in sys.modules:
            _seeded.extend(_seed_disable_cache())
    try:
        yield
    finally:
        with _seeding:
            _counts_running -= 1
            if _counts_running == 0:
                for raw in _seeded:
                    if getattr(raw, _DISABLE_CACHE, None) is raw:
                        delattr(raw, _DISABLE_CACHE)
                _seeded.clear()


def _seed_disable_cache() -> list[Any]:
    import gc
    import types

    import torch._compile
    import torch.utils.flop_counter  # noqa: F401  the dispatch modes' wrappers must exist to be found

    _other_ops_class()

    inner = [c for c in torch._compile._disable_dynamo.__code__.co_consts if isinstance(c, types.CodeType)]
    seeded = []
    for obj in gc.get_objects():
        if type(obj) is not types.FunctionType or obj.__code__ not in inner or not obj.__closure__:
            continue
        cells = dict(zip(obj.__code__.co_freevars, obj.__closure__, strict=False))
        raw = cells["fn"].cell_contents if "fn" in cells else None
        if callable(raw) and not hasattr(raw, _DISABLE_CACHE):
            setattr(raw, _DISABLE_CACHE, raw)
            seeded.append(raw)
    return seeded


def count_flops(model: Any, inputs: list[Any], holder: Any = None) -> FlopCount:
    """FLOPs and minimum bytes of one call of `model` on `inputs` (any device, meta included): a forward,
    or a training step's forward and backward (its outputs then include the gradients); `holder`: the
    module whose parameters and buffers the call reads (`model` itself when None)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    other = _counting_mode()
    with torch.no_grad(), _without_dynamo_import(), FlopCounterMode(display=False) as counter, other:
        out = model(*inputs)
    holder = model if holder is None else holder
    state = list(holder.parameters()) + list(holder.buffers())
    nbytes = sum(t.numel() * t.element_size() for t in [*state, *flat_tensors(inputs), *flat_tensors(out)])
    by_op = {str(k).split(".")[-1]: int(v) for k, v in counter.get_flop_counts().get("Global", {}).items()}
    matmul = int(counter.get_total_flops()) + other.extra_matmul
    if other.extra_matmul:
        by_op["sdpa"] = other.extra_matmul
    by_op |= other.other
    out_bytes = sum(t.numel() * t.element_size() for t in flat_tensors(out))
    return FlopCount(matmul, sum(other.other.values()), nbytes, tuple(sorted(by_op.items())), out_bytes)


def _cast(value: Any, dtype: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    return value


def problem_flops(
    problem: Problem, preset: str, dtype: str = "fp32", forward_only: bool = False
) -> FlopCount:
    """Count a problem's FLOPs and bytes under a preset and dtype, on the meta device (no memory used): of
    the call it is judged by (a training problem's step: forward and backward), or with `forward_only` of
    a training step's forward alone."""
    import torch

    torch_dtype = getattr(torch, TORCH_DTYPES[dtype])
    loaded = load(problem, preset)
    with torch.device("meta"), _without_dynamo_import():
        model = build_model(loaded).to(torch_dtype)
        torch.manual_seed(0)
        inputs = [_cast(x, torch_dtype) for x in loaded.get_inputs()]
        if forward_only and loaded.training is not None:  # the forward's inputs, not the upstream gradients
            return count_flops(model, inputs[: len(inputs) - loaded.training.upstream])
        return count_flops(loaded.judged(model), inputs, holder=model)


def sol_from_counts(counts: FlopCount, gpu: GPUSpec, dtype: str = "fp32", tf32: bool = False) -> SOL:
    heavy_rate = gpu.tflops(dtype, tf32=tf32) * 1e12
    compute_s = counts.matmul_flops / heavy_rate + counts.other_flops / (gpu.fp32_tflops * 1e12)
    memory_s = counts.bytes / (gpu.memory_bandwidth_gbs * 1e9)
    write_s = counts.output_bytes / (gpu.memory_bandwidth_gbs * 1e9)
    return SOL(
        flops=counts.flops,
        bytes=counts.bytes,
        intensity=counts.flops / counts.bytes if counts.bytes else float("inf"),
        sol_ms=max(compute_s, memory_s) * 1e3,
        bound="compute" if compute_s > memory_s else "memory",
        compute_ms=compute_s * 1e3,
        memory_ms=memory_s * 1e3,
        gpu=gpu.name,
        dtype=dtype,
        tf32=tf32,
        floor_ms=max(write_s, compute_s / 2) * 1e3,
    )


@lru_cache(maxsize=1024)
def _cached_counts(problem: Problem, preset: str, dtype: str) -> FlopCount:
    return problem_flops(problem, preset, dtype)


COUNT_REVISION = 2  # of problem_flops' counting: counts kept on disk under another revision are not used


def counts_path(problem: Problem, preset: str, dtype: str, folder: Path) -> Path:
    """Where `disk_counts` keeps the counts of (problem, preset, dtype) in `folder`: the key holds what they
    depend on (the problem's code, the preset, the dtype, torch's version and this counting's revision)."""
    from kbench.hardware import torch_version

    key = json.dumps([COUNT_REVISION, problem.code, preset, dtype, torch_version()])
    return folder / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def kept_counts(path: Path) -> FlopCount | None:
    """The counts kept at `path`, None when there are none or they cannot be read (counted again)."""
    try:
        kept = json.loads(path.read_text())
        by_op = tuple((str(name), int(n)) for name, n in kept.pop("by_op"))
        return FlopCount(**{k: int(v) for k, v in kept.items()}, by_op=by_op)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def disk_counts(problem: Problem, preset: str, dtype: str, folder: Path) -> FlopCount:
    """`problem_flops`, kept in `folder` across processes: a first count traces the model on the meta
    device (a second on a quiet CPU core, without importing torch._dynamo: `_without_dynamo_import`) for
    numbers that depend only on the problem's code, the preset, the dtype and torch's counting rules."""
    path = counts_path(problem, preset, dtype, folder)
    found = kept_counts(path)
    if found is not None:
        return found
    found = _cached_counts(problem, preset, dtype)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(asdict(found)))
    except OSError:
        pass  # a read-only or full cache: the count stands, the next process counts again
    return found


def speed_of_light(
    problem: Problem, preset: str, dtype: str, gpu: GPUSpec, tf32: bool = False, cache_dir: Path | None = None
) -> SOL:
    """The SOL of (problem, preset, dtype) on `gpu`; counts are cached per problem/preset/dtype in this
    process, and with `cache_dir` on disk too (disk_counts)."""
    if cache_dir is not None:
        return sol_from_counts(disk_counts(problem, preset, dtype, cache_dir), gpu, dtype, tf32)
    return sol_from_counts(_cached_counts(problem, preset, dtype), gpu, dtype, tf32)
