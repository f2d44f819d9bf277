"""The sampled timed calls (worker side): what of their outputs comes back to the host, whole copies up to a
size and random elements above it (`sample_outputs`, `stash`; written by tensorfiles.save_tensors, checked by
the host), and the values their inputs carry (`disguise`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from kbench.sandbox.protocol import SAMPLE_ELEMENTS
from kbench.sandbox.tensorfiles import Subsample

_urandom = os.urandom  # bound when the worker imports this module, before the candidate is imported


def sample_outputs(values: list[Any], whole_bytes: int) -> list[Any]:
    """What of a timed call's outputs comes back: a copy (`stash`) of each output up to `whole_bytes`;
    of a larger one `SAMPLE_ELEMENTS` elements at positions drawn from the OS's entropy once the call
    has returned, so the call cannot know which of its elements will be checked. Copying a 1 GiB output
    back for every sampled call cost seconds of the GPU's time per verdict; a million random elements
    still catch an output that is wrong anywhere but in a vanishing fraction of it."""
    import torch

    out: list[Any] = []
    for value in values:
        if not isinstance(value, torch.Tensor) or value.numel() * value.element_size() <= whole_bytes:
            out.extend(stash([value]))
            continue
        value = value.detach()
        gen = torch.Generator(device=value.device)
        gen.manual_seed(int.from_bytes(_urandom(8), "little") >> 1)
        index = torch.randint(0, value.numel(), (SAMPLE_ELEMENTS,), generator=gen, device=value.device)
        index = index.sort().values
        out.append(Subsample(torch.take(value, index), index, tuple(value.shape), str(value.device)))
    return out


def stash(values: list[Any]) -> list[Any]:
    """Copies of `values` (plain tensors) that later calls cannot change, for `save_tensors` to write later.

    A GPU tensor is copied on its device (microseconds, asynchronous) while the copy takes at most a
    quarter of the device's free memory, so the candidate's next calls keep their headroom; else to the
    CPU. Anything else is kept as it is (`save_tensors` rejects it as before).
    """
    import torch

    out = []
    for value in values:
        if not isinstance(value, torch.Tensor):
            out.append(value)
            continue
        value = value.detach()
        if value.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(value.device)
            if value.numel() * value.element_size() <= free // 4:
                out.append(value.clone())
                continue
        out.append(value.to("cpu", copy=True))
    return out


def swappable(a: list[Any], b: list[Any]) -> bool:
    """Two input sets whose tensors can trade values in place and whose other values are equal."""
    import torch

    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
                return False
            if x.shape != y.shape or x.dtype != y.dtype or x.device != y.device:
                return False
        elif x != y:
            return False
    return True


def disguise(sets: list[list[Any]], k: int) -> tuple[int, Callable[[], None]]:
    """Give set k the next set's values in place, through `.data` (no version bump), so an output memoised
    by pointer, shape or version is stale for this sampled call; returns the set whose values the call
    sees and the function that puts set k's own values back."""
    import torch

    j = (k + 1) % len(sets)
    if not swappable(sets[k], sets[j]):
        return k, lambda: None  # different shapes or non-tensor values: the plain call is sampled
    pairs = [(a, b) for a, b in zip(sets[k], sets[j], strict=True) if isinstance(a, torch.Tensor)]
    saved = [a.data.clone() for a, _ in pairs]
    for a, b in pairs:
        a.data.copy_(b.data)

    def undo() -> None:
        for (a, _), old in zip(pairs, saved, strict=True):
            a.data.copy_(old)

    return j, undo
