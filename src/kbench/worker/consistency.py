"""Every timed call's output fingerprinted, and the fingerprints of one input set held consistent (worker side).

Eight sampled calls are compared with the reference (timing.Reservoir); a candidate that returns a stale or
cheap output on a small share of its timed calls slips past them (wrong on 10 % of calls: 43 % of the
time). So every timed call's outputs also get a fingerprint where they live -- three float64 reductions:
the sum, the L2 norm, and the sum of a strided subsample at an offset drawn when timing starts (a
permutation of the values changes it) -- kept on the device and read once after the loop. Calls that saw
the same input values must agree: within `RTOL` of the values' scale, so an honest kernel whose
reductions are not bitwise deterministic (atomics) agrees with itself, while another input set's output,
a stale buffer or garbage does not. The sampled calls tie the agreed fingerprint to the reference: a
candidate wrong on any 1 % of a loop of a few hundred calls or more is caught with probability > 99 %.
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch

RTOL = 1e-4  # of sqrt(n) * ||x||_2, which bounds sum |x_i|; honest non-determinism is ~1e-7 of it
STRIDE = 7  # the subsample takes every 7th element from a random offset
_urandom = os.urandom  # bound before the candidate is imported
_sum, _norm, _stack = torch.sum, torch.linalg.vector_norm, torch.stack


class Consistency:
    def __init__(self) -> None:
        self.offset = int.from_bytes(_urandom(2), "little") % STRIDE
        self.prints: dict[int, list[Any]] = {}  # input set -> per call, a (outputs x 3) float64 tensor
        self.calls: dict[int, list[int]] = {}
        self.sizes: list[int] = []  # element count per output: the scale of its sums

    def add(self, call: int, input_set: int, outputs: list[Any]) -> None:
        rows = []
        self.sizes = self.sizes or [out.numel() for out in outputs]
        for out in outputs:
            flat = out.detach().reshape(-1)
            flat = flat if flat.is_floating_point() else flat.to(torch.float64)  # indices, masks
            rows.append(
                _stack(
                    [
                        _sum(flat, dtype=torch.float64),
                        _norm(flat, 2, dtype=torch.float64),
                        _sum(flat[self.offset :: STRIDE], dtype=torch.float64),
                    ]
                )
            )
        if rows:
            self.prints.setdefault(input_set, []).append(_stack(rows))
            self.calls.setdefault(input_set, []).append(call)

    def check(self) -> str | None:
        """The first call whose fingerprint disagrees with its input set's median, as a message; None if
        all agree."""
        for input_set, prints in self.prints.items():
            table = _stack(prints).cpu()  # calls x outputs x 3
            median = table.median(dim=0).values
            for i, row in enumerate(table):
                for j, (got, want) in enumerate(zip(row, median, strict=True)):
                    size = self.sizes[j] if j < len(self.sizes) else 1
                    scale = math.sqrt(max(size, 1)) * float(want[1].abs())
                    diff = (got - want).abs()
                    both_nan = got.isnan() & want.isnan()
                    bad = ((diff > RTOL * scale + 1e-30) | (got.isnan() != want.isnan())) & ~both_nan
                    if bool(bad.any()):
                        call = self.calls[input_set][i]
                        return (
                            f"timed call {call} (input set {input_set}) returned output {j} unlike the other "
                            f"calls on the same inputs (sum {float(got[0]):.6g} vs {float(want[0]):.6g})"
                        )
        return None
