"""Every timed call's output fingerprinted, and the fingerprints of one input set held consistent (worker side).

Eight sampled calls are compared with the reference (timing.Reservoir); a candidate that returns a stale or
cheap output on a small share of its timed calls slips past them (wrong on 10 % of calls: 43 % of the
time). So every timed call's outputs also get a fingerprint where they live -- three float64 reductions
over `POSITIONS` elements gathered at positions drawn from the OS's entropy when timing starts (all of a
smaller output): the sum, the L2 norm, and the sum of every `STRIDE`-th of them from a random offset (a
permutation of the values changes it) -- kept on the device and read once after the loop. Calls that saw
the same input values must agree: within `RTOL` of the values' scale, so an honest kernel whose
reductions are not bitwise deterministic (atomics) agrees with itself, while another input set's output,
a stale buffer or garbage does not. The sampled calls tie the agreed fingerprint to the reference: a
candidate wrong on 1 % of its timed calls at random is caught with probability > 99 % in a loop of 460 calls
or more (`TimingSettings.enough_runs`; every loop of a kernel under ~0.4 ms has that many).

Why gathered positions rather than the whole output: the fingerprint runs after every timed call, and
three passes over a 256 MiB output cost twice the 0.13 ms of the kernel being timed, so a loop of 1,500
calls spent more of its seconds fingerprinting than timing. A call with garbage (another set's values, a
stale or uninitialised buffer) in a share q of its elements escapes only if none of the 65,536 positions
falls there: (1 - q)^65536 (below 0.2 % for q = 1e-4), and the positions are unknown to the call when it
returns. Small errors in a few elements move the sums less than honest non-determinism may: those are for
the sampled calls, which the host compares with the reference at the problem's tolerance.
"""

from __future__ import annotations

import os
from typing import Any

import torch

RTOL = 1e-4  # of sqrt(n) * ||x||_2, which bounds sum |x_i|; honest non-determinism is ~1e-7 of it
STRIDE = 7  # the subsample takes every 7th gathered element from a random offset
POSITIONS = 1 << 16  # elements fingerprinted per output: all of a smaller one
_urandom = os.urandom  # bound before the candidate is imported
_sum, _norm, _stack, _take = torch.sum, torch.linalg.vector_norm, torch.stack, torch.take


class Consistency:
    def __init__(self) -> None:
        self.offset = int.from_bytes(_urandom(2), "little") % STRIDE
        self.prints: dict[int, list[Any]] = {}  # input set -> per call, a (outputs x 3) float64 tensor
        self.calls: dict[int, list[int]] = {}
        self.sizes: list[int] = []  # elements fingerprinted per output: the scale of its sums
        self.positions: list[Any] = []  # per output: the gathered positions (None: the whole output)
        self.numels: list[int] = []  # per output, its element count in the loop's first call
        self.device: Any = None

    def _positions(self, out: Any) -> Any:
        n = out.numel()
        if n <= POSITIONS:
            return None
        gen = torch.Generator(device=out.device)
        gen.manual_seed(int.from_bytes(_urandom(8), "little") >> 1)
        index = torch.randint(0, n, (POSITIONS,), generator=gen, device=out.device)
        return index.sort().values  # ascending: the gather reads memory in order

    def add(self, call: int, input_set: int, outputs: list[Any]) -> None:
        if self.device is None:
            self.device = outputs[0].device if outputs else torch.device("cpu")
            self.numels = [out.numel() for out in outputs]
            self.positions = [self._positions(out) for out in outputs]
            self.sizes = [
                n if p is None else POSITIONS for n, p in zip(self.numels, self.positions, strict=True)
            ]
        if [out.numel() for out in outputs] != self.numels:
            # Other outputs than the loop's first call returned: a fingerprint no call of the loop shares.
            odd = torch.full((len(self.numels), 3), float("inf"), dtype=torch.float64, device=self.device)
            self.prints.setdefault(input_set, []).append(odd)
            self.calls.setdefault(input_set, []).append(call)
            return
        rows = []
        for j, out in enumerate(outputs):
            flat = out.detach().reshape(-1)
            where = self.positions[j]
            if where is not None:
                flat = _take(flat, where.to(flat.device))  # a no-op on the positions' own device
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
            median = table.median(dim=0).values  # outputs x 3
            sizes = torch.tensor(self.sizes, dtype=torch.float64)  # every row has the first call's outputs
            scale = (sizes.clamp(min=1).sqrt() * median[:, 1].abs()).unsqueeze(1)  # outputs x 1
            diff = (table - median).abs()
            both_nan = table.isnan() & median.isnan()
            bad = ((diff > RTOL * scale + 1e-30) | (table.isnan() != median.isnan())) & ~both_nan
            rows = bad.flatten(1).any(dim=1).nonzero()
            if rows.numel():
                i = int(rows[0])
                j = int(bad[i].any(dim=1).nonzero()[0])
                call = self.calls[input_set][i]
                got, want = float(table[i, j, 0]), float(median[j, 0])
                return (
                    f"timed call {call} (input set {input_set}) returned output {j} unlike the other "
                    f"calls on the same inputs (sum {got:.6g} vs {want:.6g})"
                )
        return None
