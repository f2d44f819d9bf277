"""Reference runs shared by the evaluations of one run.

Each evaluation needs the reference's outputs on the run's secret seeds (and its baseline timings). Without
a pool every evaluation starts its own reference worker: a second process per verdict (torch import, CUDA
context, input generation, forward passes), which on a GPU holds the device lease. With a pool the first
evaluation of a problem under given settings runs the reference and later ones reuse its plan (the same
secret seeds) and outputs. The secret stays per run, as the protocol asks: a candidate never sees it, and
a new pool (a new run) draws new seeds.

Concurrent evaluations of one problem wait for the first instead of starting their own reference job.
The outputs are CPU tensors; the pool keeps at most `max_bytes` of them (by default a quarter of the
host's available memory, at least 8 GiB), least recently used first out
(an evicted problem's next evaluation draws a new plan). A failed reference run is not kept: the next
evaluation tries again and reports its own error.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kbench.config import RunConfig, mem_available
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


class ReferencePool:
    """`get(key, run)` returns (plan, reference, shared): `run()` once per key, its result for later calls."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes
        self._init()

    def _init(self) -> None:
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._entries: OrderedDict[str, tuple[Plan, ReferenceData, int]] = OrderedDict()
        self.runs = 0  # reference runs started through the pool
        self.reuses = 0

    def __getstate__(self) -> dict[str, Any]:  # shipped to Ray workers empty: each process shares its own
        return {"max_bytes": self.max_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.max_bytes = state["max_bytes"]
        self._init()

    def __len__(self) -> int:
        return len(self._entries)

    def held_bytes(self) -> int:
        with self._lock:
            return sum(size for _, _, size in self._entries.values())

    def get(
        self, key: str, run: Callable[[], tuple[Plan, ReferenceData]]
    ) -> tuple[Plan, ReferenceData, bool]:
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
                    self.reuses += 1
            if entry is not None:
                plan, data, _ = entry
                # phases belong to the evaluation that ran the reference; later ones show it was shared
                return plan, replace(data, shared=True, phases={}), True
            plan, data = run()
            size = output_bytes(data)
            with self._lock:
                self.runs += 1
                if size <= self.max_bytes:
                    self._entries[key] = (plan, data, size)
                    self._evict()
        return plan, data, False

    def _evict(self) -> None:
        total = sum(size for _, _, size in self._entries.values())
        while total > self.max_bytes and self._entries:
            _, (_, _, size) = self._entries.popitem(last=False)
            total -= size
