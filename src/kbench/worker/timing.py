"""One timing function for the reference and the candidate (worker side).

`time_callable` warms up until steady, then times one call at a time, rotating over several input sets:
on CUDA it flushes L2 (writes a buffer of 2x the L2 size) before each call, brackets the call with CUDA
events and ends with a device-wide `torch.cuda.synchronize()` (work on side streams is waited for); on
CPU it uses `perf_counter_ns`. Repeats continue until at least `min_runs` calls are in, the loop has run
for `min_time_s` and the calls' own times add up to it too, or `enough_runs` calls are in (a 0.13 ms kernel
would need 1,500 calls, 1.5 s with the flushes, to add up to 0.2 s: 460 already span 0.4 s and are what
the consistency check needs), and the relative standard error of the mean is below `target_rse` (0.5 %),
or the time budget ends. The error is that of every call, or of the calls inside Tukey's far fences (Q1 -
3 IQR, Q3 + 3 IQR) when at most `outlier_share` (5 %) of them fall outside (`fenced_rse`). Work beside the
timed job (the host's comparison on the device holds no lease) can move a few calls: one call moved by
25 ms among 2,000 calls of 2 ms keeps the mean's error above 0.5 % to the end of the 5 s budget, while the
median, the time reported, does not move (on an H200, one or two reference timings of each 48-verdict
batch ran to the budget, with the medians of the runs where they stopped at once). A loop whose calls are
widely spread still runs on.
The stats record why the loop stopped (`stop`: `rse`, `fenced` with the `outliers` left out, `budget`,
`max_runs`). Every call is also timed by a host clock from before the start event until after
the synchronize, so a timer that does not see the work (side stream, forged numbers) shows up as a
disagreement (rule `wallclock-disagreement`).

Launch latency (`hide_launch`, CUDA): after a synchronize the GPU is idle, so the start event fires at
once and the events would also count the host's time to launch the call's first kernel — Python, the
dispatcher, a candidate's wrapper: 0.1 ms of a 1.4 ms GEMM on an H200, varying between processes. Each
call is therefore queued behind a short spin kernel (`torch.cuda._sleep`) that outlasts the host's launch
time (measured in warm-up): the events then bracket the device's execution of the call, as the profiler
sees it. The host clock still covers the whole call; the empty-call floor it is compared with carries
the same spin. The method is recorded as `events+spin`.

Warm-up runs `warmup_s` (0.25 s: an idle H200's SM clock needs up to ~0.1 s of sustained load to
settle) unless, on CUDA, the clock is already settled: once `settled_warmup_s` (0.05 s) and at least two
windows of calls are in, the warm-up ends when NVML reads the SM clock at >= 97 % of its maximum over
20 ms and the last window's median call time is within 1 % of the window before. A GPU just busy with the
other worker's timing or this worker's correctness passes passes at once; a GPU held below its maximum
(locked clocks, power or thermal limits) never does and gets the full warm-up. The stats record which
(`warmup`: seconds, calls, `settled` or `full`).

On a GPU the warm-up and the timed calls hold the device's timing lock (sandbox/timinglock.py
`timing_window`): a worker that makes its CUDA context before its lease (`early_cuda`) never does so
beside a loop. A loop that waited `TIMING_WAIT_S` for the lock and did not get it runs all the same and
its stats say so (`timing_lock`: `busy`).

GPU clocks (`gpu_clock.ClockLog`) are sampled at the start of the timed calls and every ~50 ms between
them; a run whose SM clock moved more than 5 % while timing is flagged (`clocks_moved`).

The clocks are bound when this module is imported; the worker imports it before the candidate, so a
candidate that replaces `time.perf_counter_ns` or `torch.cuda.Event` afterwards does not change what
is measured here (and the worker reports rule `timer-patched`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from kbench.sandbox import lease, timinglock
from kbench.types import TimingSettings, TimingStats
from kbench.worker.gpu_clock import ClockLog, ClockSettled
from kbench.worker.timing_stats import FENCED_STEP, Running, fenced_rse, summarize_times

_perf_counter_ns = time.perf_counter_ns
_cuda_event = torch.cuda.Event
_cuda_synchronize = torch.cuda.synchronize
_cuda_sleep = getattr(torch.cuda, "_sleep", None)


def pin_threads(settings: TimingSettings) -> None:
    """Pin torch's intra-op threads (and OpenMP's, which torch sets too) before the guard snapshot.

    On a shared 2-core machine an OpenMP barrier waiting for a descheduled thread costs a scheduler
    tick: medians of 5.5 ms against minima of 0.015 ms on the small presets. Reference and candidate
    workers pin the same number, so eager and the candidate are timed under the same conditions.
    """
    if settings.threads > 0:
        torch.set_num_threads(settings.threads)


@dataclass
class TimingResult:
    stats: TimingStats
    times_ms: list[float] = field(default_factory=list)  # per call, the timer's reading
    wall_ms: list[float] = field(default_factory=list)  # per call, host clock incl. synchronize
    overhead_ms: float = 0.0  # host-clock cost of an empty timed call (events + synchronize)


def interpreted() -> bool:
    """Triton's interpreter runs kernels as numpy on the CPU: correct results, meaningless times."""
    return os.environ.get("TRITON_INTERPRET", "") == "1"


class _Clock:
    """Times one call on `device`; returns (timer ms, host-clock ms, output)."""

    SPIN_MAX_MS = 2.0  # a call whose launch takes longer has the rest counted, as before

    def __init__(self, device: torch.device, flush_l2: bool) -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        self.flush: torch.Tensor | None = None
        self.spin_cycles = 0
        self.launch_ms: list[float] = []  # host time to enqueue each call (CUDA)
        if self.cuda and flush_l2:
            l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 * 2**20)
            self.flush = torch.empty(2 * l2, dtype=torch.uint8, device=device)

    def time(self, call: Callable[[], Any]) -> tuple[float, float, Any]:
        if not self.cuda:
            t0 = _perf_counter_ns()
            out = call()
            dt = (_perf_counter_ns() - t0) / 1e6
            return dt, dt, out
        if self.flush is not None:
            self.flush.zero_()
        start, end = _cuda_event(enable_timing=True), _cuda_event(enable_timing=True)
        _cuda_synchronize()
        w0 = _perf_counter_ns()
        if self.spin_cycles and _cuda_sleep is not None:
            _cuda_sleep(self.spin_cycles)
        start.record()
        l0 = _perf_counter_ns()
        out = call()
        self.launch_ms.append((_perf_counter_ns() - l0) / 1e6)
        end.record()
        _cuda_synchronize()  # device-wide: side streams are waited for, and show up on the host clock
        w1 = _perf_counter_ns()
        return float(start.elapsed_time(end)), (w1 - w0) / 1e6, out

    def hide_launch(self) -> None:
        """Size the spin to outlast the slowest recent launch (x1.5 + 20 us), from the warm-up's launches."""
        if not self.cuda or _cuda_sleep is None or not self.launch_ms:
            return
        recent = sorted(self.launch_ms[-20:])
        want_ms = min(1.5 * recent[-1] + 0.02, self.SPIN_MAX_MS)
        self.spin_cycles = max(1, int(want_ms * _spin_cycles_per_ms(self.device)))


@functools.lru_cache(maxsize=8)
def _spin_cycles_per_ms(device: torch.device) -> float:
    """Spin-kernel cycles per millisecond, measured once per device (SM clock while busy)."""
    assert _cuda_sleep is not None
    cycles = 2_000_000
    _cuda_sleep(cycles)  # wake the clocks
    best = math.inf
    for _ in range(3):
        start, end = _cuda_event(enable_timing=True), _cuda_event(enable_timing=True)
        start.record()
        _cuda_sleep(cycles)
        end.record()
        end.synchronize()
        best = min(best, float(start.elapsed_time(end)))
    return cycles / max(best, 1e-3)


def _replay(graph: Any, out: Any) -> Any:
    graph.replay()
    return out


def _repeat(call: Callable[[], Any], k: int) -> Any:
    out = None
    for _ in range(k):
        out = call()
    return out


def _graphs(fn: Callable[..., Any], input_sets: Sequence[Sequence[Any]]) -> list[Callable[[], Any]]:
    calls: list[Callable[[], Any]] = []
    for inputs in input_sets:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn(*inputs)  # capture needs one warm call on a side stream (lazy init, autotuning)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn(*inputs)
        calls.append(functools.partial(_replay, graph, out))
    return calls


def _calls(
    fn: Callable[..., Any], input_sets: Sequence[Sequence[Any]], settings: TimingSettings, cuda: bool
) -> tuple[list[Callable[[], Any]], str]:
    if settings.graph and cuda:
        calls = _graphs(fn, input_sets)
        method = "graph"
    else:
        calls = [functools.partial(fn, *inputs) for inputs in input_sets]
        method = "events" if cuda else "perf_counter"
    if settings.batch > 1:
        k = settings.batch
        calls = [functools.partial(_repeat, c, k) for c in calls]
        method += f"x{k}"
    return calls, method


def _warmup(
    clock: _Clock,
    calls: list[Callable[[], Any]],
    settings: TimingSettings,
    settled: Callable[[float], bool] | None = None,
) -> tuple[float, int, bool]:
    """Call until `min_warmup` calls and `warmup_s` are in; with `settled` (the SM clock's test, CUDA) the
    warm-up ends sooner, after `settled_warmup_s`, once the clock is at its maximum and the calls' times
    have stopped moving: a GPU just busy with the correctness passes or the other worker's timing has
    nothing left to settle. Returns (seconds, calls, ended early)."""
    t0 = _perf_counter_ns()
    times: list[float] = []
    gate = settled if settings.settled_warmup_s > 0 else None
    k = max(settings.min_warmup, len(calls))  # windows cover every input set
    while True:
        times.append(clock.time(calls[len(times) % len(calls)])[0])
        elapsed = (_perf_counter_ns() - t0) / 1e9
        if len(times) >= settings.min_warmup and elapsed >= settings.warmup_s:
            return elapsed, len(times), False
        if elapsed > settings.budget_s / 4:
            return elapsed, len(times), False
        if (
            gate is not None
            and elapsed >= settings.settled_warmup_s
            and len(times) >= max(settings.min_warmup, 2 * k)
            and _level(times[-2 * k : -k], times[-k:])
            and gate(elapsed)
        ):
            return elapsed, len(times), True


def _level(before: Sequence[float], after: Sequence[float], tolerance: float = 0.01) -> bool:
    """The later window's median within `tolerance` of the earlier one's: the calls' time is not moving."""
    a, b = statistics.median(before), statistics.median(after)
    return abs(b - a) <= tolerance * max(a, 1e-12)


def _overhead_ms(clock: _Clock) -> float:
    """Host-clock cost of an empty timed call: the floor under every wall-clock measurement."""
    if not clock.cuda:
        return 0.0
    walls = [clock.time(lambda: None)[1] for _ in range(20)]
    return statistics.median(walls)


_urandom = os.urandom  # bound before the candidate is imported, like the clocks


class Reservoir:
    """A uniform random sample of `k` timed calls over a loop whose length is not known in advance
    (reservoir sampling). Call i < k takes slot i; a later call i is kept with probability k/(i+1), in a
    slot drawn at random, replacing the call that held it. So every call of the loop, the last ones
    included, is equally likely to be checked, and the draws come from the OS's entropy: neither the code
    nor the job file tells a candidate which of its calls will be checked. Keeping costs about
    k * (1 + ln(n/k)) copies over n calls (65 for k = 8 and 10,000 calls)."""

    def __init__(self, k: int) -> None:
        self.k = k

    def slot(self, i: int) -> int | None:
        if i < self.k:
            return i
        if (int.from_bytes(_urandom(7), "little") >> 3) * (i + 1) < self.k << 53:  # probability k/(i+1)
            return int.from_bytes(_urandom(4), "little") % self.k
        return None


def _sample_slot(sample_at: frozenset[int] | Reservoir, i: int) -> int | None:
    if isinstance(sample_at, Reservoir):
        return sample_at.slot(i)
    return sorted(sample_at).index(i) if i in sample_at else None


def time_callable(
    fn: Callable[..., Any],
    input_sets: Sequence[Sequence[Any]],
    settings: TimingSettings,
    device: torch.device,
    on_output: Callable[[int, int, Any, int], None] | None = None,
    sample_at: frozenset[int] | Reservoir = frozenset(),
    disguise: Callable[[int], tuple[int, Callable[[], None]]] | None = None,
    inspect: Callable[[int, int, Any], None] | None = None,
) -> TimingResult:
    """Time `fn(*inputs)` rotating over `input_sets`.

    `on_output(call_index, set_index, output, slot)` is called, outside the timed region, for the calls
    `sample_at` picks (fixed call indices, or a `Reservoir`), so the caller can re-check outputs produced
    while being timed; it keeps one output per slot, a later call's replacing an earlier one's. Before
    such a call, `disguise(set_index)` may put another set's values into this set's tensors (same
    objects, same version counters); it returns the index of the set whose values the call sees and a
    function that undoes it, run after the call. `inspect(call_index, set_index, output)` sees every timed
    call's output (`set_index`: the set whose values the call saw), also outside the timed region (it may
    raise to end the loop).
    """
    with _window(device) as taken:
        return _time_callable(
            fn, input_sets, settings, device, on_output, sample_at, disguise, inspect, taken
        )


@contextlib.contextmanager
def _window(device: torch.device) -> Iterator[bool]:
    """On a GPU, the device's timing lock around the loop (sandbox/timinglock.py `timing_window`: no worker
    starts CUDA beside it); yields whether it was taken."""
    if device.type != "cuda":
        yield True
        return
    with timinglock.timing_window(lease.device_id(str(device))) as taken:
        yield taken


def _time_callable(
    fn: Callable[..., Any],
    input_sets: Sequence[Sequence[Any]],
    settings: TimingSettings,
    device: torch.device,
    on_output: Callable[[int, int, Any, int], None] | None,
    sample_at: frozenset[int] | Reservoir,
    disguise: Callable[[int], tuple[int, Callable[[], None]]] | None,
    inspect: Callable[[int, int, Any], None] | None,
    window: bool,
) -> TimingResult:
    clock = _Clock(device, settings.flush_l2)
    log = ClockLog(device)
    calls, method = _calls(fn, input_sets, settings, clock.cuda)
    settled = ClockSettled(log.nvml) if log.nvml is not None else None  # never passes without NVML's GPU
    warm_s, warm_n, warm_early = _warmup(clock, calls, settings, settled)
    if settings.hide_launch and clock.cuda and _cuda_sleep is not None:
        clock.hide_launch()
        method += "+spin"
    overhead = _overhead_ms(clock)
    times: list[float] = []
    walls: list[float] = []
    running = Running()
    t0 = _perf_counter_ns()
    timed_s = 0.0
    aside_ns = 0  # spent disguising and keeping sampled outputs: not counted against the budget
    stop, outliers, fenced_at = "max_runs", 0, 0
    while len(times) < settings.max_runs:
        log.sample((_perf_counter_ns() - t0) / 1e9, force=not times)
        k = len(times) % len(calls)
        a0 = _perf_counter_ns()
        slot = _sample_slot(sample_at, len(times)) if on_output is not None else None
        sampled = slot is not None
        seen, undo = disguise(k) if sampled and disguise is not None else (k, None)
        a1 = _perf_counter_ns()
        dt, wall, out = clock.time(calls[k])
        a2 = _perf_counter_ns()
        times.append(dt / settings.batch)
        walls.append(wall / settings.batch)
        running.add(times[-1])
        if inspect is not None:
            inspect(len(times) - 1, seen, out)
        if slot is not None and on_output is not None:
            on_output(len(times) - 1, seen, out, slot)
        if undo is not None:
            undo()
        aside_ns += (a1 - a0) + (_perf_counter_ns() - a2)
        elapsed = (_perf_counter_ns() - t0 - aside_ns) / 1e9
        timed_s += dt / 1e3
        if len(times) >= settings.min_runs:
            if elapsed > settings.budget_s:
                stop = "budget"
                break
            spanned = elapsed >= settings.min_time_s and (
                timed_s >= settings.min_time_s or len(times) >= settings.enough_runs
            )
            if spanned and running.rse < settings.target_rse:
                stop = "rse"
                break
            if spanned and settings.outlier_share > 0 and len(times) >= fenced_at:
                fenced_at = int(len(times) * FENCED_STEP) + 1
                rse, outside = fenced_rse(times)
                if rse < settings.target_rse and outside <= settings.outlier_share * len(times):
                    stop, outliers = "fenced", outside
                    break
    log.sample((_perf_counter_ns() - t0) / 1e9, force=True)
    extras = log.extras()
    if clock.spin_cycles:
        extras["spin_ms"] = round(clock.spin_cycles / _spin_cycles_per_ms(device), 4)
        extras["launch_ms"] = round(statistics.median(clock.launch_ms[-len(times) :]), 4)
    wall_s = round((_perf_counter_ns() - t0) / 1e9, 3)
    extras["threads"] = torch.get_num_threads()
    extras["warmup"] = (round(warm_s, 3), warm_n, "settled" if warm_early else "full")
    extras["stop"] = stop
    if not window:  # another process held the timing lock past its wait: something may have run beside
        extras["timing_lock"] = "busy"
    if stop == "fenced":
        extras["outliers"] = outliers
    stats = summarize_times(times, device.type, method, meaningful=not interpreted(), wall_s=wall_s, **extras)
    return TimingResult(stats=stats, times_ms=times, wall_ms=walls, overhead_ms=overhead)


def with_budget(settings: TimingSettings, budget_s: float) -> TimingSettings:
    return replace(settings, budget_s=budget_s)
