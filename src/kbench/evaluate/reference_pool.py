"""Reference runs shared by the evaluations of one run.

Each evaluation needs the reference's outputs on the run's secret seeds (and its baseline timings). Without
a pool every evaluation starts its own reference worker: a second process per verdict (torch import, CUDA
context, input generation, forward passes), which on a GPU holds the device lease. With a pool the first
evaluation of a problem under given settings runs the reference and later ones reuse its plan (the same
secret seeds) and outputs. The secret stays per run, as the protocol asks: a candidate never sees it, and
a new pool (a new run) draws new seeds.

Concurrent evaluations of one problem wait for the first instead of starting their own reference job.
The outputs are CPU tensors; the pool keeps at most `max_bytes` of them (by default a quarter of the
host's available memory, at least 8 GiB); an evicted problem's next evaluation draws a new plan. A failed
reference run is not kept: the next evaluation tries again and reports its own error.

What goes when the pool is full: an entry saves one reference run per later use whatever its size, so
bytes are spent where they keep the most entries (GreedyDual-Size with one cost for every entry: a credit
of 1/size, renewed on each use, on top of the credit of the last entry evicted, so that entries not used
for a long time age out whatever their size). Least-recently-used alone kept nothing of a batch that
visits its problems in turn: on an H200 host 36 problems' outputs (57 GiB) outgrew the pool, and every
entry was evicted just before its problem's next candidate came (108 reference runs for 108 verdicts).
When the caller knows how many evaluations each problem has (`expect`), a problem's entries go as soon
as its last one has ended, and that last one runs its own reference unless the pool has it (`begin`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kbench.config import RunConfig, mem_available
from kbench.evaluate.reference_cache import size_credit
from kbench.types import Problem

if TYPE_CHECKING:
    from kbench.evaluate.plan import Plan
    from kbench.evaluate.reference_cache import ReferenceData

DEFAULT_MAX_BYTES = 8 << 30  # at least; a quarter of the host's available memory when that is more


def default_max_bytes() -> int:
    """What a pool may hold: outputs of one problem can be several GiB (a 1 GiB output for each of its
    seeds), so a fixed 8 GiB held about one large problem and a batch that came back to a problem after
    others had to run its reference again. A quarter of the memory available when the pool starts."""
    return max(DEFAULT_MAX_BYTES, mem_available() // 4)


# The configuration fields a reference run depends on (the rest concern the candidate or the run).
REFERENCE_FIELDS = RunConfig.reference_fields()


def pool_key(problem: Problem, cfg: RunConfig, device: str, skip: Collection[str]) -> str:
    """Same key = same reference run: problem (key and code), device, modes not timed, reference settings."""
    fields = cfg.model_dump(mode="json", include=set(REFERENCE_FIELDS))
    text = json.dumps(
        {
            "problem": problem.key,
            "code": hashlib.sha256(problem.code.encode()).hexdigest(),
            "device": device,
            "skip": sorted(skip),
            "cfg": fields,
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def output_bytes(data: ReferenceData) -> int:
    import torch

    return sum(
        t.numel() * t.element_size()
        for outs in data.outputs.values()
        for t in outs
        if isinstance(t, torch.Tensor)
    )


@dataclass
class _Entry:
    plan: Plan
    data: ReferenceData
    size: int
    group: str
    credit: float = 0.0


class ReferencePool:
    """`get(key, run)` returns (plan, reference, shared): `run()` once per key, its result for later calls."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes
        self._init()

    def _init(self) -> None:
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first (ties)
        self._floor = 0.0  # the credit of the last entry evicted (GreedyDual-Size's inflation)
        self._left: Counter[str] = Counter()  # group -> evaluations expected and not begun yet
        self._open: Counter[str] = Counter()  # group -> evaluations begun and not ended
        self._running: Counter[str] = Counter()  # group -> reference runs in progress for the pool
        self.runs = 0  # reference runs started through the pool
        self.reuses = 0

    def __getstate__(self) -> dict[str, Any]:
        # Shipped to Ray workers empty, each process sharing its own, but with the evaluations expected: a
        # problem with one is that one's alone in any process; one with more keeps its entries until a
        # process has seen them all (one that sees only some never drops them: evictions only).
        return {"max_bytes": self.max_bytes, "left": dict(self._left)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.max_bytes = state["max_bytes"]
        self._init()
        self._left.update(state.get("left", {}))

    def __len__(self) -> int:
        return len(self._entries)

    def held_bytes(self) -> int:
        with self._lock:
            return sum(e.size for e in self._entries.values())

    def get(
        self, key: str, run: Callable[[], tuple[Plan, ReferenceData]], group: str = ""
    ) -> tuple[Plan, ReferenceData, bool]:
        """`group`: what `expect`, `begin` and `end` count the entry under (a problem's key)."""
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
                    entry.credit = self._credit(entry.size)
                    self.reuses += 1
            if entry is not None:
                # phases belong to the evaluation that ran the reference; later ones show it was shared
                return entry.plan, replace(entry.data, shared=True, phases={}), True
            with self._lock:
                self._running[group] += 1
            try:
                plan, data = run()
            finally:
                with self._lock:
                    self._running[group] -= 1
            size = output_bytes(data)
            with self._lock:
                self.runs += 1
                if size <= self.max_bytes:
                    self._entries[key] = _Entry(plan, data, size, group, self._credit(size))
                    self._evict()
        return plan, data, False

    def expect(self, groups: Iterable[str]) -> None:
        """The evaluations to come, one group (a problem's key) per evaluation. Each `begin`s and `end`s;
        when a group's last has ended its entries leave the pool, as nothing would reuse them."""
        with self._lock:
            self._left.update(groups)

    def begin(self, group: str) -> bool:
        """One evaluation of `group` starts. Whether it should ask the pool: False only for an expected
        group's last evaluation when the pool neither holds nor is running its reference (the evaluation
        then runs its own, which on a GPU leaves the outputs on the device instead of writing them to files
        for candidates that never come)."""
        with self._lock:
            if group not in self._left:
                return True
            self._left[group] -= 1
            self._open[group] += 1
            return self._left[group] > 0 or self._running[group] > 0 or self._holds(group)

    def end(self, group: str) -> None:
        """An evaluation that `begin` counted ended, with a verdict or not."""
        with self._lock:
            if group not in self._open:
                return
            self._open[group] -= 1
            self._release(group)

    def unexpect(self, group: str) -> None:
        """One evaluation `expect`ed for `group` will not come (its verdict was stored already)."""
        with self._lock:
            if self._left[group] > 0:
                self._left[group] -= 1
                self._release(group)

    def _release(self, group: str) -> None:
        if self._left[group] <= 0 and self._open[group] <= 0:
            for key in [k for k, e in self._entries.items() if e.group == group]:
                del self._entries[key]

    def _holds(self, group: str) -> bool:
        return any(e.group == group for e in self._entries.values())

    def _credit(self, size: int) -> float:
        return size_credit(self._floor, size)

    def _evict(self) -> None:
        total = sum(e.size for e in self._entries.values())
        while total > self.max_bytes and self._entries:
            # the lowest credit; among equals the least recently used (the OrderedDict's order)
            key = min(self._entries, key=lambda k: self._entries[k].credit)
            entry = self._entries.pop(key)
            self._floor = entry.credit
            total -= entry.size
