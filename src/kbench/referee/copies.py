"""The referee's own device work around a timed batch (referee/timing.py): what copying a batch's outputs
takes it (`Copier`, the part of the copies not charged to the calls), its snapshot of the outputs the
checks read, and its write of 2x the L2 before each batch."""

from __future__ import annotations

import time
from typing import Any


class Copier:
    """What copying B calls' outputs takes the referee itself: the part of a runner's copy that is not
    charged to its calls."""

    def __init__(self, slots: list[Any], device: str) -> None:
        import torch

        self.device = device
        self.scratch = [[torch.empty_like(t) for t in slot.tensors] for slot in slots]
        # written, not only allocated: a CPU copy out of pages never touched reads the kernel's zero page,
        # a fraction of what copying a call's real outputs takes
        self.sources = [[torch.ones_like(t) for t in slot.tensors] for slot in slots]
        self.seconds = self._measure()

    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize(self.device)

    def _into_scratch(self, sources: list[list[Any]]) -> list[list[Any]]:
        for dst, src in zip(self.scratch, sources, strict=True):
            for d, s in zip(dst, src, strict=True):
                d.copy_(s)
        self._sync()
        return self.scratch

    def _once(self) -> float:
        self._sync()
        t0 = time.perf_counter_ns()
        self._into_scratch(self.sources)
        return (time.perf_counter_ns() - t0) / 1e9

    def _measure(self) -> float:
        self._once()  # first touch of fresh pages
        return min(self._once() for _ in range(5))

    def snapshot(self, slots: list[Any]) -> list[list[Any]]:
        """The referee's own copy of the slots' outputs, made on its own stream and waited for: what the
        checks read. The runner can still write the slots it mapped after it answered; a runner that
        answered before its work was done leaves unfinished outputs here, which the checks catch, or
        pays the wait in this copy's time."""
        return self._into_scratch([slot.tensors for slot in slots])


class L2:
    """The referee's own write of 2x the device's L2 before each batch (CUDA; nothing on the CPU)."""

    def __init__(self, device: str, on: bool) -> None:
        self.buffer = None
        if on and device.startswith("cuda"):
            import torch

            props = torch.cuda.get_device_properties(device)
            l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
            self.buffer = torch.empty(2 * l2, dtype=torch.uint8, device=device)

    def flush(self) -> None:
        if self.buffer is not None:
            self.buffer.zero_()
