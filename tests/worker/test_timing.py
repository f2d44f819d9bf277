"""The timing function on CPU, its statistics, and the wall-clock disagreement rule."""

from __future__ import annotations

import itertools
import math
import time

import pytest
import torch

from kbench.evaluate.judge import wallclock_disagrees
from kbench.worker.timing import TimingSettings, time_callable
from kbench.worker.timing_stats import summarize_times


def test_summarize_statistics() -> None:
    s = summarize_times([1.0, 2.0, 3.0, 4.0, 100.0], "cpu", "perf_counter")
    assert s.median_ms == 3.0 and s.min_ms == 1.0 and s.n == 5
    assert s.mean_ms == pytest.approx(22.0)
    assert s.rse == pytest.approx(s.std_ms / 5**0.5 / s.mean_ms)
    assert s.iqr_ms > 0


def test_cpu_timing_rotates_inputs_and_samples_outputs() -> None:
    sets = [(torch.full((8,), float(i)),) for i in range(3)]
    seen: list[tuple[int, int, float]] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.001)
        return x * 2

    settings = TimingSettings(budget_s=0.5, warmup_s=0.01, min_runs=20)
    res = time_callable(
        fn,
        sets,
        settings,
        torch.device("cpu"),
        lambda c, k, o, _: seen.append((c, k, float(o[0]))),
        frozenset({0, 4}),
    )
    st = res.stats
    assert st.method == "perf_counter" and st.n >= 20 and st.meaningful
    assert 0.9 <= st.median_ms <= 20
    assert [(c, k, v) for c, k, v in seen] == [(0, 0, 0.0), (4, 1, 2.0)]
    assert len(res.times_ms) == st.n


def test_disguised_sample_calls_expose_a_memo_keyed_on_the_tensor() -> None:
    """A sampled call sees another set's values in the same tensor (same version): a candidate that
    memoises per tensor returns the stale output; an honest one computes on the new values."""
    sets = [(torch.full((8,), float(i)),) for i in range(3)]

    def disguise(k: int) -> tuple[int, object]:
        j = (k + 1) % len(sets)
        old = sets[k][0].data.clone()
        sets[k][0].data.copy_(sets[j][0].data)
        return j, lambda: sets[k][0].data.copy_(old)

    memo: dict[tuple[int, int], torch.Tensor] = {}

    def memoised(x: torch.Tensor) -> torch.Tensor:
        return memo.setdefault((x.data_ptr(), x._version), x * 2)

    for fn, stale in ((lambda x: x * 2, False), (memoised, True)):
        seen: list[tuple[int, int, float]] = []
        settings = TimingSettings(budget_s=0.2, warmup_s=0.0, min_warmup=3, min_runs=20)
        res = time_callable(
            fn, sets, settings, torch.device("cpu"), lambda c, k, o, _, seen=seen: seen.append((c, k, float(o[0]))),
            frozenset({0, 4}), disguise,
        )  # fmt: skip
        assert [(c, k) for c, k, _ in seen] == [(0, 1), (4, 2)]  # the set whose values the call saw
        wrong = [v != 2.0 * k for _, k, v in seen]
        assert all(wrong) if stale else not any(wrong)
        assert [float(s[0][0]) for s in sets] == [0.0, 1.0, 2.0]  # values restored after each call
        assert res.stats.n >= 20


def test_time_spent_keeping_samples_is_not_charged_to_the_budget() -> None:
    """Keeping a sampled output (a copy, then a file) takes seconds for a large output; counted against the
    budget it stopped the loop at min_runs with a noisy mean."""
    sets = [(torch.ones(4),)]
    kept: list[int] = []

    def slow_keep(call: int, k: int, out: torch.Tensor, slot: int) -> None:
        time.sleep(0.1)
        kept.append(call)

    settings = TimingSettings(budget_s=0.3, warmup_s=0.0, min_warmup=1, min_runs=20, target_rse=0.0)
    t0 = time.perf_counter()

    def fn(x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.001)
        return x + 1

    res = time_callable(fn, sets, settings, torch.device("cpu"), slow_keep, frozenset(range(10)))
    assert kept == list(range(10))  # 1 s of keeping, more than three budgets
    assert res.stats.n > 100  # the loop ran on for its own 0.3 s of 1 ms calls, not 20
    assert time.perf_counter() - t0 >= 1.0 + 0.3


def test_stash_copies_what_later_calls_could_change() -> None:
    from kbench.worker.sampling import stash

    out = torch.arange(4.0)
    kept = stash([out, 3])
    out.add_(10)  # a memoising candidate reuses and rewrites its output buffer
    assert kept[0].tolist() == [0.0, 1.0, 2.0, 3.0] and kept[1] == 3


def test_adaptive_repeats_stop_at_target_rse() -> None:
    settings = TimingSettings(
        budget_s=5.0, warmup_s=0.0, min_warmup=1, min_runs=20, target_rse=1.5, min_time_s=0.0
    )
    res = time_callable(lambda: None, [()], settings, torch.device("cpu"))
    # The standard error of a mean of positive times is at most the mean itself (one sample holding all
    # the time), so a target of 1.5 is met as soon as min_runs is reached, whatever the host's jitter.
    assert res.stats.n == 20
    tight = TimingSettings(
        budget_s=0.2, warmup_s=0.0, min_warmup=1, min_runs=20, target_rse=1e-9, min_time_s=0.0
    )
    res = time_callable(lambda: None, [()], tight, torch.device("cpu"))
    assert res.stats.n > 20  # an unreachable target keeps repeating until the budget ends


def test_repeats_cover_the_minimum_timed_time() -> None:
    settings = TimingSettings(
        budget_s=5.0, warmup_s=0.0, min_warmup=1, min_runs=5, target_rse=1.5, min_time_s=0.1
    )
    res = time_callable(lambda: time.sleep(0.004), [()], settings, torch.device("cpu"))
    # the target is always met (see above), so the loop stops at the first call that reaches 0.1 s
    # of timed calls, however long a late call took on a busy host
    assert sum(res.times_ms[:-1]) / 1e3 < 0.1 <= sum(res.times_ms) / 1e3 and res.stats.n > 5


@pytest.mark.gpu
def test_short_kernels_stop_at_enough_runs_once_the_loop_spans_the_minimum_time() -> None:
    """A ~20 us kernel would need 10,000 calls for their times to add up to 0.2 s; the loop stops at 460
    or more once it has run for 0.2 s (flushes, spins and synchronizes included)."""
    x = torch.randn(1 << 20, device="cuda")
    settings = TimingSettings(budget_s=5.0, target_rse=1.5, min_time_s=0.2)
    res = time_callable(lambda: x * 2, [()], settings, torch.device("cuda"))
    assert dict(res.stats.extra)["wall_s"] >= 0.2 and sum(res.times_ms) / 1e3 < 0.1
    assert settings.enough_runs <= res.stats.n < 5000


@pytest.mark.gpu
def test_spin_hides_the_launch_latency_of_a_slow_host() -> None:
    """A call that spends 0.3 ms on the host before a ~0.1 ms kernel: without the spin the events count the
    host's 0.3 ms; with it they count about the kernel alone, and the host clock still sees the whole call."""
    x = torch.randn(4 << 20, device="cuda")

    def call() -> torch.Tensor:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 3e-4:
            pass
        return x * 2.0

    base = TimingSettings(budget_s=2.0, warmup_s=0.05, min_runs=30, min_time_s=0.0)
    plain = time_callable(
        call, [()], TimingSettings(**{**base.__dict__, "hide_launch": False}), torch.device("cuda")
    )
    spun = time_callable(call, [()], base, torch.device("cuda"))
    assert spun.stats.method == "events+spin" and plain.stats.method == "events"
    assert plain.stats.median_ms > 0.3 > spun.stats.median_ms
    assert min(spun.wall_ms) > 0.3  # the host clock still covers the launch
    extra = dict(spun.stats.extra)
    assert extra["spin_ms"] >= extra["launch_ms"] >= 0.3
    assert extra["clock_samples"] >= 2 and extra["sm_clock_mhz"][1] > 0  # NVML read the worker's GPU


def test_batching_is_recorded_in_method() -> None:
    settings = TimingSettings(budget_s=0.2, warmup_s=0.0, min_runs=5, batch=4)
    assert time_callable(lambda: None, [()], settings, torch.device("cpu")).stats.method == "perf_counterx4"


def test_interpreter_timings_are_not_meaningful(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    settings = TimingSettings(budget_s=0.1, warmup_s=0.0, min_runs=3)
    assert not time_callable(lambda: None, [()], settings, torch.device("cpu")).stats.meaningful


def test_wallclock_disagreement() -> None:
    # honest small kernels: 10 us on the timer, 35 us on the host clock, 20 us empty-call overhead
    assert not wallclock_disagrees([0.010] * 50, [0.035] * 50, 0.020)
    # honest large kernel
    assert not wallclock_disagrees([2.0] * 50, [2.03] * 50, 0.020)
    # side stream: the timer sees 10 us, the device-wide synchronize waits 1 ms
    assert wallclock_disagrees([0.010] * 50, [1.0] * 50, 0.020)
    # behind a 0.1 ms launch spin the honest gap is the spin plus the synchronize; a side stream's 0.3 ms of
    # work that outlasts the spin still shows (the threshold counts the spin once, not three times)
    assert not wallclock_disagrees([0.010] * 50, [0.135] * 50, 0.120, spin_ms=0.100)
    assert wallclock_disagrees([0.010] * 50, [0.330] * 50, 0.120, spin_ms=0.100)
    assert not wallclock_disagrees([0.010] * 50, [0.330] * 50, 0.120)  # without knowing the spin: missed


def test_threads_are_pinned_and_recorded() -> None:
    from kbench.worker.timing import pin_threads

    before = torch.get_num_threads()
    try:
        pin_threads(TimingSettings(threads=1))
        stats = time_callable(
            lambda x: x + 1, [[torch.ones(8)]], TimingSettings(budget_s=0.05), torch.device("cpu")
        ).stats
        assert dict(stats.extra)["threads"] == 1
    finally:
        torch.set_num_threads(before)


def test_cpu_settings_pin_threads_and_cap_the_budget(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kbench.config import RunConfig
    from kbench.evaluate.plan import timing_settings

    cfg = RunConfig(timing_budget_s=5.0, cpu_threads=2, cpu_timing_budget_s=1.0, cache_dir=tmp_path)
    cpu, gpu = timing_settings(cfg, "cpu"), timing_settings(cfg, "cuda:0")
    assert (cpu.threads, cpu.budget_s) == (2, 1.0)
    assert (gpu.threads, gpu.budget_s) == (0, 5.0)
    assert (
        gpu.hide_launch
        and not timing_settings(cfg.model_copy(update={"timing_hide_launch": False}), "cuda:0").hide_launch
    )
    full = timing_settings(cfg.model_copy(update={"timing_settled_warmup": False}), "cuda:0")
    assert gpu.settled_warmup_s > 0 and full.settled_warmup_s == 0
    every = cfg.model_copy(update={"timing_outlier_share": 0.0})
    assert gpu.outlier_share == cpu.outlier_share == 0.05
    assert timing_settings(every, "cuda:0").outlier_share == timing_settings(every, "cpu").outlier_share == 0
    with pytest.raises(ValueError, match="timing_outlier_share"):
        RunConfig(timing_outlier_share=0.5, cache_dir=tmp_path)


def test_only_like_input_sets_trade_values() -> None:
    from kbench.worker.sampling import disguise, swappable

    t = torch.zeros(2, 3)
    assert swappable([t, 4, "mean"], [torch.ones(2, 3), 4, "mean"])
    assert not swappable([t, 4], [torch.ones(2, 3), 5])  # a differing scalar: the sets are not alike
    assert not swappable([t], [torch.ones(3, 2)])  # another shape
    assert not swappable([t], [torch.ones(2, 3, dtype=torch.float64)])
    assert not swappable([t], [t, t]) and not swappable([t], [1.0])
    sets = [[torch.zeros(2)], [torch.ones(2)]]
    first, version = sets[0][0], sets[0][0]._version
    seen, undo = disguise(sets, 0)  # set 0 carries set 1's values, in the same tensor, same version
    assert seen == 1 and sets[0][0] is first and first.tolist() == [1.0, 1.0] and first._version == version
    undo()
    assert first.tolist() == [0.0, 0.0]
    assert disguise([[t], [torch.ones(3, 2)]], 0)[0] == 0  # unlike sets: the call sees its own values


def test_inspect_sees_every_timed_output_and_may_end_the_loop() -> None:
    settings = TimingSettings(budget_s=0.2, warmup_s=0.0, min_warmup=2, min_runs=20, min_time_s=0.0)
    seen: list[int] = []
    counter = itertools.count()  # the loop may run to max_runs (10,000) within its budget
    res = time_callable(
        lambda: next(counter), [()], settings, torch.device("cpu"), inspect=lambda c, k, out: seen.append(out)
    )
    assert len(seen) == res.stats.n and seen == list(range(2, 2 + res.stats.n))  # after the 2 warm-up calls

    def refuse(call: int, k: int, out: int) -> None:
        if out == 7:
            raise RuntimeError("bad output")

    again = itertools.count()
    with pytest.raises(RuntimeError, match="bad output"):
        time_callable(lambda: next(again), [()], settings, torch.device("cpu"), inspect=refuse)
    assert next(again) == 8  # the loop ended at the call that returned 7


def test_a_reservoir_samples_every_call_of_the_loop_alike() -> None:
    """The kept calls are a uniform sample of the whole loop, the last calls as likely as the first."""
    from kbench.worker.timing import Reservoir

    n, k, trials = 200, 8, 2000
    late = 0
    for _ in range(trials):
        kept: dict[int, int] = {}
        r = Reservoir(k)
        for i in range(n):
            slot = r.slot(i)
            if slot is not None:
                kept[slot] = i
        assert sorted(kept) == list(range(k))
        late += sum(i >= n // 2 for i in kept.values())
    assert 0.45 < late / (trials * k) < 0.55  # 16,000 draws: the standard error is 0.004


def test_the_loop_keeps_one_output_per_reservoir_slot() -> None:
    from kbench.worker.timing import Reservoir

    settings = TimingSettings(budget_s=0.3, warmup_s=0.0, min_warmup=1, min_runs=20, target_rse=0.0)
    kept: dict[int, int] = {}
    counter = iter(range(1_000_000))
    res = time_callable(
        lambda: next(counter), [()], settings, torch.device("cpu"),
        lambda c, k, o, slot: kept.__setitem__(slot, c), Reservoir(8),
    )  # fmt: skip
    assert sorted(kept) == list(range(8)) and all(0 <= c < res.stats.n for c in kept.values())
    assert res.stats.n > 1000 and max(kept.values()) >= 8  # later calls replaced the first eight


def test_running_rse_matches_summarize() -> None:
    """The loop's O(1) stopping statistic is the same number `summarize_times` reports."""
    import random

    from kbench.worker.timing_stats import Running, summarize_times

    rng = random.Random(3)
    xs = [0.1 + rng.random() * 0.01 for _ in range(2000)] + [5.0, 0.0001]
    running = Running()
    for i, x in enumerate(xs):
        running.add(x)
        if i in (1, 10, 500, len(xs) - 1):
            assert running.rse == pytest.approx(summarize_times(xs[: i + 1], "", "").rse, rel=1e-9)


class _Clockwork:
    """A host clock that moves only when a timed call runs: each call takes the next time from `ms`
    (the loop's own bookkeeping takes none), so a loop's stopping decisions are exact on any machine."""

    def __init__(self, ms: list[float]) -> None:
        self.ns, self.ms, self.calls = 0, ms, 0

    def clock(self) -> int:
        return self.ns

    def call(self) -> None:
        self.ns += int(self.ms[self.calls % len(self.ms)] * 1e6)
        self.calls += 1


def _timed_by(monkeypatch: pytest.MonkeyPatch, ms: list[float], **settings: float):  # type: ignore[no-untyped-def]
    from kbench.worker import timing

    work = _Clockwork(ms)
    monkeypatch.setattr(timing, "_perf_counter_ns", work.clock)
    base = {"budget_s": 5.0, "warmup_s": 0.0, "min_warmup": 1, "min_runs": 20, "min_time_s": 0.1} | settings
    return time_callable(work.call, [()], TimingSettings(**base), torch.device("cpu"))  # type: ignore[arg-type]


def test_fenced_rse_leaves_out_far_calls_only() -> None:
    from kbench.worker.timing_stats import fenced_rse

    level = [2.0 + 0.01 * (i % 5) for i in range(200)]
    rse, outside = fenced_rse(level)
    assert outside == 0 and rse == pytest.approx(summarize_times(level, "", "").rse)
    rse, outside = fenced_rse([*level, 30.0, 0.01])  # one call held up, one that did no work
    assert outside == 2 and rse == pytest.approx(summarize_times(level, "", "").rse)
    assert fenced_rse([1.0, 2.0, 3.0]) == (math.inf, 0)  # too few calls to have quartiles
    rse, outside = fenced_rse([1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 9.0])  # no spread between the quartiles
    assert (rse, outside) == (0.0, 2)


def test_one_held_up_call_does_not_keep_the_loop_to_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """2 ms calls, the 31st held up by 40 ms (another process's work on the GPU): the mean's error stays
    over 0.5 % for ~4,000 calls, so the loop ran its whole 5 s budget for a median that never moved. Inside
    the fences the error is met as soon as the loop spans its minimum time."""
    ms = [2.0 + 0.01 * (i % 5) for i in range(30)] + [42.0] + [2.0 + 0.01 * (i % 5) for i in range(10_000)]
    fenced = _timed_by(monkeypatch, ms, min_time_s=0.2)
    extra = dict(fenced.stats.extra)
    assert extra["stop"] == "fenced" and extra["outliers"] == 1
    assert 70 <= fenced.stats.n <= 90 and fenced.stats.median_ms == pytest.approx(2.02)  # 0.2 s of calls
    every = _timed_by(monkeypatch, ms, min_time_s=0.2, outlier_share=0.0)  # every call counts: the old rule
    assert dict(every.stats.extra)["stop"] == "budget" and every.stats.n > 2000
    assert every.stats.median_ms == pytest.approx(fenced.stats.median_ms)


def test_widely_spread_calls_still_run_to_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """One call in five at 3x the time is a spread, not a few held-up calls: too many lie outside the
    fences for them to be left out, and the loop runs on as before."""
    res = _timed_by(monkeypatch, [1.0, 1.0, 1.0, 1.0, 3.0], budget_s=1.0, target_rse=0.001)
    assert dict(res.stats.extra)["stop"] == "budget" and "outliers" not in dict(res.stats.extra)


def test_a_tight_loop_stops_on_the_plain_error(monkeypatch: pytest.MonkeyPatch) -> None:
    res = _timed_by(monkeypatch, [2.0, 2.01, 2.02])
    assert dict(res.stats.extra)["stop"] == "rse" and res.stats.n == 50  # 0.1 s of 2 ms calls


class _FakeNvml:
    """NVML as `ClockSettled` sees it: a maximum SM clock and readings taken from a script."""

    handle = object()

    def __init__(self, top: float | None, readings: list[float]) -> None:
        self.top, self.readings = top, readings

    def max_sm_clock(self) -> float | None:
        return self.top

    def read(self) -> tuple[float, float, int] | None:
        clock = self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]
        return clock, 40.0, 0


def test_clock_settled_needs_a_high_reading_held_over_its_window() -> None:
    from kbench.worker.gpu_clock import ClockSettled

    gate = ClockSettled(_FakeNvml(1980.0, [345.0, 1980.0, 1975.0, 1200.0, 1980.0]), hold_s=0.02)  # type: ignore[arg-type]
    assert not gate(0.00)  # idle clock
    assert not gate(0.01)  # high now, not yet held
    assert not gate(0.02)  # held 10 ms
    assert not gate(0.03)  # dropped: starts over
    assert not gate(0.04)
    assert gate(0.061)  # high since 0.04
    assert gate(0.0615)  # between readings the answer stands


def test_clock_settled_never_passes_without_a_known_maximum_or_below_it() -> None:
    from kbench.worker.gpu_clock import ClockSettled

    unknown = ClockSettled(_FakeNvml(None, [1980.0]))  # type: ignore[arg-type]
    capped = ClockSettled(_FakeNvml(1980.0, [1750.0]))  # type: ignore[arg-type]  # power-capped or locked
    assert not any(unknown(t / 100) for t in range(20))
    assert not any(capped(t / 100) for t in range(20))


def _warm(settings: TimingSettings, call_ms: object, settled: object) -> tuple[float, int, bool]:
    from kbench.worker.timing import _Clock, _warmup

    return _warmup(_Clock(torch.device("cpu"), False), [call_ms], settings, settled)  # type: ignore[list-item, arg-type]


def test_warmup_ends_early_on_a_settled_clock_and_level_calls() -> None:
    settings = TimingSettings(warmup_s=0.5, settled_warmup_s=0.03, min_warmup=5)
    seconds, calls, early = _warm(settings, lambda: time.sleep(0.002), lambda now: True)
    assert early and 0.03 <= seconds < 0.25 and calls >= 10


def test_warmup_runs_its_full_length_while_the_clock_is_not_settled() -> None:
    settings = TimingSettings(warmup_s=0.15, settled_warmup_s=0.03, min_warmup=5)
    seconds, _, early = _warm(settings, lambda: time.sleep(0.002), lambda now: False)
    assert not early and seconds >= 0.15
    off = TimingSettings(warmup_s=0.15, settled_warmup_s=0.0, min_warmup=5)  # the early end turned off
    seconds, _, early = _warm(off, lambda: time.sleep(0.002), lambda now: True)
    assert not early and seconds >= 0.15


def test_warmup_runs_on_while_the_calls_still_speed_up() -> None:
    """A settled clock is not enough: calls whose time still falls (caches, allocator, autotuning) keep
    the warm-up going."""
    n = itertools.count()
    settings = TimingSettings(warmup_s=0.15, settled_warmup_s=0.01, min_warmup=5)
    seconds, _, early = _warm(settings, lambda: time.sleep(0.012 / (1 + next(n) / 4)), lambda now: True)
    assert not early and seconds >= 0.15


def test_warmup_is_recorded_in_the_stats() -> None:
    settings = TimingSettings(budget_s=0.5, warmup_s=0.02, min_runs=5, min_time_s=0.0)
    stats = time_callable(lambda: None, [()], settings, torch.device("cpu")).stats
    seconds, calls, how = dict(stats.extra)["warmup"]
    assert how == "full" and seconds >= 0.02 and calls >= settings.min_warmup


@pytest.mark.gpu
def test_warmup_ends_early_on_a_busy_gpu_and_times_the_same() -> None:
    """Right after sustained work (what the other worker's timing or the correctness passes leave) the
    warm-up ends at the settled test, not after its full 0.25 s, and the median matches a full warm-up's."""
    from kbench.worker.gpu_clock import ClockSettled, Nvml

    device = torch.device("cuda")
    if ClockSettled(Nvml(device)).floor == float("inf"):
        pytest.skip("NVML reads no maximum SM clock for this GPU")
    x = torch.randn(16 << 20, device=device)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.5:  # an elementwise load: busy, far from any power cap
        x.mul_(1.0)
    torch.cuda.synchronize()
    settings = TimingSettings(budget_s=5.0)
    quick = time_callable(lambda: x * 2, [()], settings, device).stats
    full = time_callable(lambda: x * 2, [()], TimingSettings(settled_warmup_s=0.0), device).stats
    seconds, _, how = dict(quick.extra)["warmup"]
    assert how == "settled" and seconds < settings.warmup_s
    assert dict(full.extra)["warmup"][2] == "full"
    assert abs(quick.median_ms - full.median_ms) <= 0.02 * full.median_ms
