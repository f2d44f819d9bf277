"""A problem's seeded inputs, made the same way by the reference worker, the candidate worker and the
trusted in-process tools (`kbench verify`, problems/trivial.py).

Inputs are generated on the evaluation device under `torch.manual_seed(seed)` (factory calls in
`get_inputs` run inside a `torch.device` context; the reference and the candidate worker run the same
code on the same device, so they get bit-identical inputs), then cast to the problem dtype. On a GPU this
takes milliseconds where the CPU's generator took seconds for the `full` presets' largest inputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from kbench.problems.loader import LoadedProblem

TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def ieee_numerics() -> None:
    """Compute float32 as float32 in both workers, before any snapshot or candidate import.

    torch's defaults let cuDNN convolutions use TF32 (`cudnn.allow_tf32 = True`), about 1e-3 relative
    error: an honest fp32 kernel then "mismatches" the reference (seen on an H200: 19 % of a conv2d's
    outputs beyond 1e-4), and a TF32 kernel looks correct. The reference is the fp32 result, so TF32 is off
    everywhere; a candidate that turns it back on trips the `global-state` rule. Changing this changes
    reference outputs: bump evaluate.reference_cache.NUMERICS so cached ones are not reused.
    """
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def seed_all(seed: int) -> None:
    """`torch.manual_seed(seed)`, the same generators' states, without its lazy seeding of device types no
    one can start here: each such call records its caller's stack (0.6 ms in all on a slow core), and the
    timing loop seeds every call's inputs (referee/feed.py). Where CUDA can start but has not, the lazy
    seeding stays, as torch does it."""
    if torch.cuda.is_initialized():
        torch.default_generator.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)
    elif torch.cuda.is_available():
        torch.manual_seed(seed)
    else:
        torch.default_generator.manual_seed(seed)


def generate_inputs(get_inputs: Any, seed: int, device: torch.device | str) -> list[Any]:
    """`get_inputs()` under `seed`, its factory calls made on `device` (as returned: not moved or cast).
    Changing where inputs are made changes their values: bump evaluate.reference_cache.NUMERICS with it."""
    device = torch.device(device)
    seed_all(seed)
    if device.type == "cpu":
        return list(get_inputs())
    with torch.device(device):
        return list(get_inputs())


def make_inputs(get_inputs: Any, seed: int, device: torch.device, dtype: str) -> list[Any]:
    """`get_inputs()` under `seed`, generated on `device` (CPU-made tensors are moved), cast to `dtype`."""
    return [_place(x, device, dtype) for x in generate_inputs(get_inputs, seed, device)]


def _place(x: Any, device: torch.device, dtype: str) -> Any:
    if not isinstance(x, torch.Tensor):
        return x
    x = x.to(device)
    return x.to(TORCH_DTYPES[dtype]) if x.is_floating_point() else x


def flatten_outputs(out: Any) -> list[Any]:
    """A forward's result as a list: one tensor, or the items of a tuple/list."""
    if isinstance(out, tuple | list):
        return list(out)
    return [out]


def seeded_inputs(loaded: LoadedProblem, seed: int, device: str) -> list[Any]:
    """`get_inputs()` under a seed, generated on `device` as the evaluator does (problems/inputs.make_inputs
    without the dtype cast): a GPU's generator makes the `full` presets' gigabytes in milliseconds."""
    import torch

    made = generate_inputs(loaded.get_inputs, seed, device)
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in made]
