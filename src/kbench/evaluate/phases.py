"""Where a verdict's seconds went (host side): `Verdict.phases`.

Top-level names (no colon) are consecutive segments of the evaluating thread's wall time and add up to
`Verdict.seconds`: `cli` (the command's own start: interpreter, imports, before evaluating), `checks`,
`ref` (the reference run, or the wait for the one the run shares; `ref:offer` is the host's offer of
device buffers to a candidate worker started beside it: evaluate/device_outputs.py), `build` (waiting
for the candidate's build once the reference is done), `cand` (the candidate worker and reading its
result), `judge` (comparing outputs and samples, the speed-of-light floor), `hidden` (with
--hidden-shapes: the second check at unseen sizes), and `other`: whatever no segment covered.

Nested names (`ref:outputs`, `cand:timing`, ...) break a segment down: each worker's own phases, its
`start` (process start, imports and teardown: its wall time that its phases do not cover), `spawn`
(from asking for the worker to its start: a fork of the warm starter, or the starter's own start on
first use; of it, `starter` is the wait for a starter still coming up, and then `starter_start` that
starter's own start, from its launch to its answer, with its imports in `starter_torch` and
`starter_kbench`), the referee's `walls` (its runner entering its namespaces, limits and Landlock), the
runner's own phases as it reports them (`runner_import`, `runner_cuda`, `runner_walls_*` for each step of
its walls...: inside its referee's phases, shown and not added) and the host's reads (`ref:lookup`: the reference's disk cache entry read and every file of it checked, before
its worker starts). Nested ones overlap their segment and are not added to the total.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from kbench.sandbox.starter import START_PHASES


class Account:
    def __init__(self, before_s: float = 0.0) -> None:
        self.t0 = time.monotonic()
        self.top: dict[str, float] = {"cli": before_s} if before_s > 0 else {}
        self.nested: dict[str, float] = {}

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.top[name] = self.top.get(name, 0.0) + time.monotonic() - t0

    def worker(self, segment: str, phases: Mapping[str, float]) -> None:
        """A worker's phases under `segment`; its `start` is its wall time (`wall`) less its phases."""
        own = {k: v for k, v in phases.items() if k not in HOST_KEYS and not k.startswith(BESIDE)}
        wall = own.pop("wall", None)
        for key, value in phases.items():
            if key not in ("wall",):
                self.nested[f"{segment}:{key}"] = value
        if wall is not None:
            self.nested[f"{segment}:worker"] = wall
            self.nested[f"{segment}:start"] = round(max(0.0, wall - sum(own.values())), 3)

    def items(self) -> tuple[tuple[str, float], ...]:
        total = time.monotonic() - self.t0 + self.top.get("cli", 0.0)
        top = {k: round(v, 3) for k, v in self.top.items()}
        top["other"] = round(max(0.0, total - sum(self.top.values())), 3)
        return tuple(top.items()) + tuple((k, round(v, 3)) for k, v in self.nested.items())

    def seconds(self) -> float:
        return time.monotonic() - self.t0 + self.top.get("cli", 0.0)


# host parts kept with a worker's phases (`lookup`: the reference's disk cache entry read and checked;
# `starter...`: the part of `spawn` spent waiting for the warm starter to come up, and its own start)
HOST_KEYS = ("spawn", "read", "lookup", "cache", "compare", "samples", *START_PHASES)
# the runner's own phases, inside its referee's (kbench/referee/): shown, not added to the job's accounted time
BESIDE = "runner_"


def accounted(phases: Mapping[str, float] | tuple[tuple[str, float], ...]) -> float:
    """The share of a verdict's wall time its named segments cover (1 - other / total)."""
    items = dict(phases)
    top = {k: v for k, v in items.items() if ":" not in k}
    total = sum(top.values())
    return 1.0 - top.get("other", 0.0) / total if total > 0 else 1.0
