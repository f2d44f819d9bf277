"""The timing loop: the referee times batches of calls it commands, with its own clock (trusted).

The runner holds the model, the referee holds the clock. Each batch is two commands: B calls back to back,
each on inputs made fresh for it (referee/feed.py), a device-wide synchronise, the answer; then the copy of
their outputs into the referee's output slots. The referee's clock runs from each command to its answer;
then it snapshots the slots into memory of its own and waits for that. The Run's window is charged less
what a batch costs beyond its work (referee/calibrate.py: batches of known work on the same runner, before
the candidate is imported, so it cannot inflate it); the Copy's less its own round trip and one copy of the
outputs as the referee takes it (referee/copies.py); the snapshot's less its own copy and the switch back.
Each part is floored at nothing: a copy that did not happen takes nothing off the calls; work left running
past an answer is paid in the next window, or leaves unfinished outputs for the checks. A call's time is its
batch's time over B; nothing the runner reports about time is used (its stamps: `split_ms`, for the record).

- Batches: after the warm-up, B is chosen so that a batch runs about `target_batch_s` (10 ms on a GPU, 20
  ms on a CPU), within `max_batch`, the memory a quarter of the free memory allows for B calls' inputs
  and outputs and the budget's room for `min_runs` batches; a call's own time and a batch's wall cost come
  from untimed probe batches (`_probe`), their slots bound before the timed ones. Back to back, a call's
  launch overlaps the previous call's work, so a batch measures what the device executes, as the profiler
  sees it. What the calibration cannot remove (the first call's
  launch, the round trip's jitter) is a fixed cost per batch, the same share of the reference's and the
  candidate's batches, which run equally long.
- Length: N calls, fixed before the first timed batch from the probes' estimate: at least
  `settings.min_runs` batches, `settings.min_time_s` of calls and the checked calls (referee/checks.py),
  at most what `settings.budget_s` allows. A loop that runs past its budget stops there (`stop`: budget).
- Checked calls: after each batch's snapshot, some are drawn and compared with the reference's output here
  (referee/checks.py). Inputs: every call's own, each slot compared with its pristine copy after each batch.
  After the loop, SINGLE_CALLS one-call batches give a call alone (`single_call_ms`, their least), each
  charged less a batch of no calls run just before it (under the loop's own conditions), never less than the
  calibration's overhead: a runner that answers an empty batch slowly cannot shrink its call alone.
- GPU: the loop holds the device's timing lock (sandbox/timinglock.py); L2 is flushed by the referee before
  each batch (its own write of 2x the L2 size); NVML's SM clock is logged (`clocks_moved`); the warm-up
  ends early once the clock has settled at its maximum (`ClockSettled`).
Statistics (referee/stats.py) are over batches: `n` batches, `median_ms` the median of their per-call times.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from kbench.referee import Stop, checks
from kbench.referee.calibrate import Calibration
from kbench.referee.copies import L2, Copier
from kbench.referee.feed import Feed, memory_cap, plain
from kbench.referee.sizing import BatchCost, batch_size, fit_batch, loop_length, own_call, probe_size, warmed
from kbench.referee.stats import summarize_times
from kbench.sandbox.commands import Call, OutputMeta
from kbench.types import LoopFacts, Status, TimingSettings, TimingStats

_ns = time.perf_counter_ns
# Under a watch, batches drawn before each timed batch (the runner cannot tell which), one in WATCH_EVERY
# or as many as the watch's `wanted_s` of calls needs, run sampled beside the timed ones; after the loop,
# more while fewer than WATCH_MIN ran or the watch has not `enough` (within the loop's budget)
WATCH_EVERY, WATCH_MIN = 4, 3
SINGLE_CALLS = 8  # one-call batches after the loop: a call alone, for the batch-together rule
PROBES = 2  # untimed batches after the warm-up that size the loop's batches (`_probe`)


class Watch(Protocol):
    """A sampling of whose code a runner's calls ran (referee/perfshare.py `Watch`), entered around a
    batch's Run command. `every`: every timed batch runs under it, its time kept (no batch is unsampled,
    so none can be told from a sampled one); else batches drawn in among the timed ones do, their times
    not kept."""

    wanted_s: float  # about how many seconds of calls it needs sampled
    every: bool

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...

    def enough(self) -> bool: ...


class Link(Protocol):
    """What the loop needs of the runner (referee/session.py, or a model in this process for trusted
    in-process tools): run calls and keep their outputs; copy them into output slots."""

    def run(
        self, calls: list[Call], mode: str, outputs: list[int], repeat: int = 0
    ) -> list[list[OutputMeta]]:
        """Run `calls`, copy their outputs into the slots `outputs` (one per call), synchronise, answer.
        No calls: a calibration batch, 1 added to the output slots `repeat` times."""
        ...

    def copy(self, outputs: list[int]) -> None:
        """Copy the last run's outputs into the slots `outputs` (one per call), synchronise, answer."""
        ...


@dataclass
class Loop:
    stats: TimingStats
    layout: list[OutputMeta] = field(default_factory=list)
    flagged: checks.Flagged | None = None  # a checked call unlike the reference: the loop ended there


@contextlib.contextmanager
def _window(device: str) -> Iterator[bool]:
    if not device.startswith("cuda"):
        yield True
        return
    from kbench.sandbox import lease, timinglock

    with timinglock.timing_window(lease.device_id(device)) as taken:
        yield taken


def interpreted() -> bool:
    """Triton's interpreter runs kernels as numpy on the CPU: correct results, meaningless times."""
    import os

    return os.environ.get("TRITON_INTERPRET", "") == "1"


class _Batches:
    """One loop's batches against one runner: fill, command, time, copy, check, keep."""

    def __init__(
        self, link: Link, feed: Feed, mode: str, layout: list[OutputMeta], checker: checks.Checker | None,
        watch: Watch | None = None,
    ) -> None:  # fmt: skip
        self.link, self.feed, self.mode, self.layout = link, feed, mode, layout
        self.checker = checker
        self.watch = watch
        self.copier: Copier | None = None
        self.active_s = 0.0  # the runner's windows: its commands' round trips, from send to answer
        self.calibration: Calibration = getattr(link, "calibration", None) or Calibration()
        # where the timed batches' seconds went (LoopFacts.split_ms, per batch): the Run and the
        # Copy commands from send to answer, the referee's snapshot, what was charged; and the Run's window
        # split at the runner's stamps (untrusted: reported, never used): the command's way to the runner,
        # its calls' launches, a copy's launch (none in a timed batch), its synchronise, its answer's way
        self.split: dict[str, float] = {}
        self.counted = 0
        self.every = False  # every batch under the watch: set once the warm-up is over

    def one(
        self, size: int, first: int, share: float, watched: bool = False, overhead_s: float | None = None
    ) -> float:
        """Run calls first..first+size-1 and check the mutation of their inputs and, with probability
        `share` each, their outputs; their per-call seconds. `watched`: under the watch (a watch of
        `every` batch: whenever the loop has started). `overhead_s`: deducted from the Run's window in
        place of the calibration's (never more: see `empty`)."""
        filled = [self.feed.fill(j, secrets.randbelow(2**62)) for j in range(size)]
        outs = self.feed.output_slots(self.layout, size)
        if self.copier is None or len(self.copier.scratch) != size:
            self.copier = Copier(outs, self.feed.device)
        calls, targets = [f.call() for f in filled], [slot.ident for slot in outs]
        self.feed.ready()
        with (
            self.watch if self.watch is not None and (watched or self.every) else nullcontext()
        ):  # around the Run's window, not in it
            t0 = _ns()
            metas = self.link.run(calls, self.mode, [])
            t1 = _ns()
        self.link.copy(targets)
        t2 = _ns()
        seen = self.copier.snapshot(outs)
        t3 = _ns()
        self._validate(metas, first)
        # Each window less what is not the calls' work, each part floored at nothing: the Run's less the
        # cost of a batch (the link's calibration); the Copy's less its own round trip and what the same
        # copy takes the referee (Copier), so a runner that skips the copy (its outputs made in the slots,
        # which it maps and which are reused in order) saves none of its calls' time; the snapshot's less
        # its own copy and the switch back. Work left running past an answer is paid in the next window,
        # or leaves unfinished outputs for the checks.
        run_s, copy_s, snap_s = (t1 - t0) / 1e9, (t2 - t1) / 1e9, (t3 - t2) / 1e9
        cal, copier_s = self.calibration, self.copier.seconds
        charged = max(0.0, run_s - (cal.overhead_s if overhead_s is None else overhead_s))
        charged += max(0.0, copy_s - cal.copy_s - copier_s)
        charged += max(0.0, snap_s - copier_s - cal.switch_s)
        self.active_s += run_s + copy_s
        if not watched:
            self._account(t0, t1, {"copy_command": copy_s, "snapshot": snap_s, "charged": charged})
        for j, f in enumerate(filled):
            self.feed.check_unchanged(f, f"timed call {first + j}")
        if self.checker is not None:
            for j in checks.drawn(size, share):  # drawn now, after the calls ran
                self.checker.check(first + j, filled[j].pristine, filled[j].literals, seen[j])
        return charged / size

    def empty(self) -> float:
        """The Run window of a batch of no calls (a calibration batch of no work), now: what a batch costs
        beyond its calls under the loop's own conditions, which may be less than the calibration found
        before the candidate's import. The runner's code may be the candidate's by now, so it is only
        ever used capped by the calibration (`min`): a runner that answers it slowly gains nothing."""
        slot = self.feed.calibration_slot()
        self.feed.ready()
        t0 = _ns()
        self.link.run([], "", [slot.ident], 0)
        took = (_ns() - t0) / 1e9
        self.link.copy([])
        return took

    def _account(self, t0: int, t1: int, parts: dict[str, float]) -> None:
        """Add one batch to the split: the referee's measures, and the runner's stamps in the Run's window
        where it gave them (the same monotonic clock; untrusted, for the record only)."""
        stamps = list(getattr(self.link, "stamps", None) or [])
        parts = {"run": (t1 - t0) / 1e9, **parts}
        if len(stamps) == 4 and t0 <= stamps[0] <= stamps[1] <= stamps[2] <= stamps[3] <= t1:
            marks = [t0, *stamps, t1]
            names = ("to_runner", "calls", "copy", "sync", "answer")
            parts |= {name: (b - a) / 1e9 for name, a, b in zip(names, marks[:-1], marks[1:], strict=True)}
        for name, value in parts.items():
            self.split[name] = self.split.get(name, 0.0) + value
        self.counted += 1

    def _validate(self, metas: list[list[OutputMeta]], first: int) -> None:
        for j, call in enumerate(metas):
            plain(call, f"timed call {first + j}")
            shapes = [(m.dtype, m.shape, m.device) for m in call]
            if shapes != [(m.dtype, m.shape, m.device) for m in self.layout]:
                raise Stop(
                    Status.CHEAT,
                    f"timed call {first + j} returned outputs shaped unlike its correctness calls",
                    "timing-output-mismatch",
                )


def time_runner(
    link: Link,
    feed: Feed,
    layout: list[OutputMeta],
    settings: TimingSettings,
    mode: str = "",
    checker: checks.Checker | None = None,
    watch: Watch | None = None,
    meter: Callable[[], float] | None = None,
) -> Loop:
    """Time the runner's model (`mode`, for the reference's baselines) on fresh inputs; with `checker` (a
    candidate's loop), calls drawn after each batch are compared with the reference. `layout`: one call's
    outputs (its correctness calls'). With `watch` (the referee's sampling of whose code the calls ran:
    referee/perfshare.py `Watch`): with its `every`, every timed batch runs under it (the CPU, where the
    reference's loop is sampled alike, so both pay the sampling's slowdown); else batches like the timed
    ones, drawn in among them (one in WATCH_EVERY, WATCH_MIN at least), run under it, their times not kept.
    Either way more run under it after the loop while it has not `enough` samples. `meter`: the runner's
    CPU seconds so far, read from outside (LoopFacts.runner_cpu_s: from the first timed batch on)."""
    with _window(feed.device) as taken:
        loop = _time(link, feed, layout, settings, mode, checker, watch, meter)
    if not taken and loop.stats.loop is not None:  # another process held the lock past its wait
        loop.stats = replace(loop.stats, loop=replace(loop.stats.loop, timing_lock_busy=True))
    return loop


def _time(
    link: Link, feed: Feed, layout: list[OutputMeta], settings: TimingSettings, mode: str,
    checker: checks.Checker | None, watch: Watch | None, meter: Callable[[], float] | None = None,
) -> Loop:  # fmt: skip
    from kbench.referee.gpu_clock import ClockLog, ClockSettled

    device = feed.device
    batches = _Batches(link, feed, mode, layout, checker, watch)
    batches.one(1, 0, 0.0)  # a first call outside the clock: torch.compile compiles here
    l2 = L2(device, settings.flush_l2)
    log = ClockLog(__import__("torch").device(device))
    settled = ClockSettled(log.nvml) if log.nvml is not None else None
    t0 = _ns()
    warm: list[float] = []
    early = False
    while True:  # warm-up: one call per batch until the clocks settle
        l2.flush()
        warm.append(batches.one(1, 0, 0.0))
        elapsed = (_ns() - t0) / 1e9
        enough = len(warm) >= settings.min_warmup and elapsed >= settings.warmup_s
        if enough or elapsed > settings.budget_s / 4:
            break
        if warmed(warm, elapsed, settings, settled):
            early = True
            break
    one_s = (_ns() - t0) / 1e9 / max(len(warm), 1)  # a one-call batch's wall, the referee's own work included
    cap = memory_cap(feed, layout)
    estimate = statistics.median(warm[-settings.min_warmup :])
    estimate, cost = _probe(batches, l2, estimate, one_s, settings, cap)
    size = fit_batch(batch_size(estimate, settings, cap), cost, settings)
    checked = checks.CHECKED if checker is not None else 0
    calls = loop_length(estimate, size, settings, checked, cost.wall(size) / size)
    share = checks.share(calls) if checker is not None else 0.0
    feed.reserve(size, layout)  # its slots bound before the timed batches
    times: list[float] = []
    batches.split, batches.counted, batches.active_s = {}, 0, 0.0
    cpu0 = meter() if meter is not None else None
    start = _ns()
    stop = "done"
    flagged = None
    extra = watched = 0
    singles: list[float] = []
    calibrated = batches.calibration.overhead_s
    try:
        every = watch is not None and watch.every
        batches.every = every  # the timed batches (and the later ones) under the watch, times kept
        odds = 0.0 if every else _watch_odds(watch, calls, size, estimate)
        for first in range(0, calls, size):
            if watch is not None and checks.drawn(1, odds):  # the checked calls' draw, for one batch
                l2.flush()
                batches.one(size, calls + extra, share, watched=True)
                extra, watched = extra + size, watched + 1
            log.sample((_ns() - start) / 1e9, force=not times)
            l2.flush()
            times.append(batches.one(size, first, share) * 1e3)
            watched += every
            if (_ns() - start) / 1e9 > settings.budget_s and first + size < calls:
                stop = "budget"
                break
        for _ in range(SINGLE_CALLS if size > 1 else 0):  # not timed: a call alone (`single_call_ms`)
            l2.flush()
            now = batches.empty()
            l2.flush()
            single = batches.one(1, calls + extra, share, watched=True, overhead_s=min(now, calibrated))
            singles.append(single * 1e3)
            extra, watched = extra + 1, watched + (watch is not None)
        while watch is not None and (watched < WATCH_MIN or not watch.enough()):
            if (_ns() - start) / 1e9 > settings.budget_s and watched >= WATCH_MIN:
                break
            batches.one(size, calls + extra, share, watched=True)
            extra, watched = extra + size, watched + 1
        while checker is not None and checker.checked < checks.CHECKED:
            # A loop cut short (its budget) or too short checked too few calls: more calls, every one
            # checked, which the runner cannot tell from the timed ones; their times are not kept.
            batches.one(size, calls + extra, 1.0)
            extra += size
    except checks.Flagged as exc:
        flagged, stop = exc, "flagged"
    log.sample((_ns() - start) / 1e9, force=True)
    wall = (_ns() - start) / 1e9
    runner_cpu = round(meter() - cpu0, 4) if meter is not None and cpu0 is not None else None
    if not times:
        times = [warm[-1] * 1e3]
    facts = LoopFacts(
        batch=size,
        calls=len(times) * size,
        checked=checker.checked if checker is not None else 0,
        warmup_s=round((start - t0) / 1e9, 3),
        warmup_calls=len(warm),
        warmup_end="settled" if early else "full",
        stop=stop,
        wall_s=round(wall, 3),
        extra_checked_calls=extra,
        watched_batches=watched,
        active_s=round(batches.active_s, 4),
        copy_ms=round(batches.copier.seconds * 1e3, 4) if batches.copier else 0.0,
        overhead_ms=round(batches.calibration.overhead_s * 1e3, 4),
        copy_overhead_ms=round(batches.calibration.copy_s * 1e3, 4),
        switch_ms=round(batches.calibration.switch_s * 1e3, 4),
        split_ms=tuple((k, round(v * 1e3 / max(batches.counted, 1), 4)) for k, v in batches.split.items()),
        single_call_ms=round(min(singles), 6) if singles else None,
        single_calls=len(singles),
        runner_cpu_s=runner_cpu,
    )
    stats = summarize_times(times, "cuda" if device.startswith("cuda") else "cpu", "referee-batches",
                            meaningful=not interpreted(), loop=facts, clock=log.facts())  # fmt: skip
    return Loop(stats=stats, layout=layout, flagged=flagged)


def _probe(batches: _Batches, l2: L2, estimate: float, one_s: float, settings: TimingSettings,
           cap: int) -> tuple[float, BatchCost]:  # fmt: skip
    """A call's own time and a batch's wall cost, from untimed batches of the size they suggest (`PROBES` at
    most): a one-call batch carries a whole batch's costs past their calibrated least, so the warm-up's
    estimate alone sizes batches short, those costs a large share of each call's time. The runner gains
    nothing here: no time is kept, and batches sized wrong cost it only precision or budget."""
    call, cost, size = estimate, BatchCost(0.0, one_s), 1
    for _ in range(0 if interpreted() else PROBES):
        want = probe_size(call, settings, cap)
        if fit_batch(want, cost, settings) <= max(1.0, size * 1.25):
            break
        size = fit_batch(want, cost, settings)
        l2.flush()
        t0 = _ns()
        per = batches.one(size, 0, 0.0)
        cost = BatchCost.between(one_s, size, (_ns() - t0) / 1e9, per)
        call = own_call(estimate, size, per)
    return call, cost


def _watch_odds(watch: Watch | None, calls: int, size: int, per_call_s: float) -> float:
    """The chance of a watched batch before each timed one: 1 in WATCH_EVERY, or what `wanted_s` asks."""
    if watch is None:
        return 0.0
    batches = max(1, math.ceil(calls / size))
    wanted = math.ceil(watch.wanted_s / max(size * per_call_s, 1e-9))
    return min(1.0, max(1 / WATCH_EVERY, wanted / batches))
